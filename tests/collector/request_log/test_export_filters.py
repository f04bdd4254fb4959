"""Every export filter works with both formats, and the downloaded rows are the matching ones."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.request_log.export_steps import RECORDS, finish, start


@pytest.fixture
def logged(api: TestClient) -> TestClient:
    response = api.post("/v1/requests/batch", json={"records": RECORDS})
    assert response.json()["data"]["accepted"] == 3
    return api


def downloaded_ids(api: TestClient, export_id: str, fmt: str) -> list[str]:
    text = api.get(f"/v1/requests/exports/{export_id}/download").text
    if fmt == "csv":
        return [row["id"] for row in csv.DictReader(io.StringIO(text))]
    return [json.loads(line)["id"] for line in text.splitlines()]


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"prompt_name": "greet"}, ["req_e2", "req_e1"]),
        ({"status": "error"}, ["req_e2"]),
        ({"status": "success"}, ["req_e3", "req_e1"]),
        ({"start_date": "2026-04-02"}, ["req_e3", "req_e2"]),
        ({"end_date": "2026-04-02"}, ["req_e2", "req_e1"]),
        ({"metadata": {"team": "a"}}, ["req_e1"]),
        (
            {"prompt_name": "greet", "start_date": "2026-04-01", "end_date": "2026-04-30"},
            ["req_e2", "req_e1"],
        ),
    ],
)
def test_each_filter_exports_the_matching_rows_in_both_formats(
    logged: TestClient, fmt: str, filters: dict[str, Any], expected: list[str]
) -> None:
    export_id = start(logged, format=fmt, filters=filters)["export_id"]

    done = finish(logged, export_id)

    assert (done["status"], done["error"], done["row_count"]) == ("completed", None, len(expected))
    assert downloaded_ids(logged, export_id, fmt) == expected
