"""Exports (spec 2.7, docs/api-notes.md, "Request log"): CSV and JSON lines straight from
ClickHouse, jobs that survive restarts, downloads under the same key, retention."""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.dates import utc_now_ms
from tests.collector.request_log.export_steps import RECORDS, finish, start
from tests.keys import DEFAULT_AUTH

HEADERS = DEFAULT_AUTH


@pytest.fixture
def logged(api: TestClient) -> TestClient:
    response = api.post("/v1/requests/batch", json={"records": RECORDS})
    assert response.json()["data"]["accepted"] == 3
    return api


def test_export_starts_processing_then_completes_with_a_download_url(logged: TestClient) -> None:
    created = start(logged, format="csv")

    assert created["export_id"].startswith("export_")
    assert created["status"] == "processing"
    assert created["download_url"] is None
    done = finish(logged, created["export_id"])
    assert done["status"] == "completed"
    assert done["download_url"].endswith(f"/v1/requests/exports/{created['export_id']}/download")
    assert done["row_count"] == 3


def test_csv_export_contents(logged: TestClient) -> None:
    export_id = start(logged, format="csv", filters={"prompt_name": "greet"})["export_id"]
    finish(logged, export_id)

    response = logged.get(f"/v1/requests/exports/{export_id}/download")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [r["id"] for r in rows] == ["req_e2", "req_e1"]
    first = rows[1]
    assert json.loads(first["input_variables"]) == {"name": 'Zoë, "the" tester'}
    assert json.loads(first["output"]) == {"content": "Hello\nZoë"}
    assert json.loads(first["metadata"]) == {"team": "a"}
    assert (first["created_at"], first["total_tokens"], first["estimated_cost_usd"]) == (
        "2026-04-01T08:00:00.000000Z",
        "5",
        "0.5",
    )
    assert rows[0]["status"] == "error" and rows[0]["error"] == "boom"


def test_csv_writes_a_missing_value_as_an_empty_cell(logged: TestClient) -> None:
    export_id = start(logged, format="csv")["export_id"]
    finish(logged, export_id)

    text = logged.get(f"/v1/requests/exports/{export_id}/download").text

    # req_e2 and req_e3 have no version: an empty cell, never ClickHouse's \N marker.
    assert "\\N" not in text
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(text, newline=""))}
    assert (rows["req_e1"]["version"], rows["req_e2"]["version"], rows["req_e3"]["version"]) == (
        "1",
        "",
        "",
    )


def test_json_export_is_json_lines_with_objects_embedded(logged: TestClient) -> None:
    export_id = start(logged, format="json", include_metadata=False)["export_id"]
    finish(logged, export_id)

    response = logged.get(f"/v1/requests/exports/{export_id}/download")

    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["id"] for line in lines] == ["req_e3", "req_e2", "req_e1"]
    oldest = lines[2]
    assert oldest["input_variables"] == {"name": 'Zoë, "the" tester'}
    assert oldest["output"] == {"content": "Hello\nZoë"}
    assert oldest["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
        # Counted inside the tokens above (issue 35.4); this record had none.
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "estimated_cost_usd": 0.5,
    }
    assert oldest["version"] == 1 and lines[0]["version"] is None
    assert all("metadata" not in line for line in lines)


def test_export_filters_by_dates_and_metadata(logged: TestClient) -> None:
    export_id = start(
        logged,
        format="json",
        filters={"start_date": "2026-04-02", "end_date": "2026-04-03", "metadata": {"team": "b"}},
    )["export_id"]
    finish(logged, export_id)

    text = logged.get(f"/v1/requests/exports/{export_id}/download").text

    assert [json.loads(line)["id"] for line in text.splitlines()] == ["req_e2"]


def test_empty_csv_export_still_has_its_header(api: TestClient) -> None:
    export_id = start(api, format="csv")["export_id"]
    assert finish(api, export_id)["row_count"] == 0

    text = api.get(f"/v1/requests/exports/{export_id}/download").text

    assert text.splitlines()[0].startswith('"id","created_at"')
    assert len(text.splitlines()) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"format": "xml"}, "format"),
        ({"filters": {"start_date": "soon"}}, "filters.start_date"),
        ({"filters": {"colour": "red"}}, "filters.colour"),
        ({"include_metadata": "maybe"}, "include_metadata"),
    ],
)
def test_bad_export_requests_store_no_job(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    response = api.post("/v1/requests/export", json=body)

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == field


def test_unknown_export_and_other_projects_exports_are_404(logged: TestClient) -> None:
    export_id = start(logged)["export_id"]
    finish(logged, export_id)
    other = logged.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    as_other = {"Authorization": f"Bearer {other}"}

    for path in (
        "/v1/requests/exports/export_nope",
        f"/v1/requests/exports/{export_id}",
        f"/v1/requests/exports/{export_id}/download",
    ):
        response = logged.get(path, headers=as_other if "nope" not in path else None)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "EXPORT_NOT_FOUND"
    assert logged.get(f"/v1/requests/exports/{export_id}/download", headers={}).status_code == 200


def test_download_needs_a_key(logged: TestClient) -> None:
    export_id = start(logged)["export_id"]
    finish(logged, export_id)

    response = logged.get(
        f"/v1/requests/exports/{export_id}/download", headers={"Authorization": ""}
    )

    assert response.status_code == 401


def test_completed_export_survives_a_restart(settings: Settings, logged: TestClient) -> None:
    export_id = start(logged, format="json")["export_id"]
    finish(logged, export_id)
    before = logged.get(f"/v1/requests/exports/{export_id}/download").text

    with TestClient(create_app(settings), headers=HEADERS) as restarted:
        status = restarted.get(f"/v1/requests/exports/{export_id}").json()["data"]
        after = restarted.get(f"/v1/requests/exports/{export_id}/download").text

    assert status["status"] == "completed"
    assert after == before


def test_export_interrupted_by_a_restart_is_resumed(settings: Settings, logged: TestClient) -> None:
    services = logged.app.state.services  # type: ignore[attr-defined]
    export_id = start(logged, format="csv")["export_id"]
    job = services.store.exports.get("default", export_id)
    finish(logged, export_id)
    # The state a crash mid-export leaves behind: the job still processing, no file. (Its
    # status set here: the export may have finished before the job above was read.)
    stale = replace(job, status="processing", row_count=0, updated_at=utc_now_ms())
    services.store.exports.save(stale)
    (settings.exports_path / f"{export_id}.csv").unlink()
    assert logged.get(f"/v1/requests/exports/{export_id}").json()["data"]["status"] == "processing"

    with TestClient(create_app(settings), headers=HEADERS) as restarted:
        done = finish(restarted, export_id)
        text = restarted.get(f"/v1/requests/exports/{export_id}/download").text

    assert done["status"] == "completed"
    assert len(list(csv.DictReader(io.StringIO(text)))) == 3


def test_files_past_retention_expire(settings: Settings) -> None:
    short = settings.model_copy(update={"export_retention_days": 1 / (24 * 3600)})
    with TestClient(create_app(short), headers=HEADERS) as api:
        export_id = start(api)["export_id"]
        finish(api, export_id)
        time.sleep(1.2)
        api.app.state.services.exports.maintain()  # type: ignore[attr-defined]

        status = api.get(f"/v1/requests/exports/{export_id}").json()["data"]
        download = api.get(f"/v1/requests/exports/{export_id}/download")

    assert status["status"] == "expired" and status["download_url"] is None
    assert download.status_code == 404
    assert not (short.exports_path / f"{export_id}.csv").exists()


def test_retention_default_is_seven_days(settings: Settings) -> None:
    assert timedelta(days=settings.export_retention_days) == timedelta(days=7)


def test_csv_cells_a_spreadsheet_would_run_as_formulas_start_with_a_quote(
    api: TestClient,
) -> None:
    # Anyone who can log a record chooses its text; whoever opens the CSV must not run it.
    formulas = {
        "req_f1": ('=HYPERLINK("http://evil.example","open")', "+cmd|' /C calc'!A0"),
        "req_f2": ("@SUM(A1:A9)", "-2+3"),
        "req_f3": ("\tgpt", "\rboom"),
    }
    plain = {"req_f4": ("gpt-4o", "a plain error")}
    records = [
        {"id": rid, "model": model, "status": "error", "error": error, "output": model}
        for rid, (model, error) in {**formulas, **plain}.items()
    ]
    assert api.post("/v1/requests/batch", json={"records": records}).json()["data"]["accepted"] == 4

    csv_id = start(api, format="csv")["export_id"]
    json_id = start(api, format="json")["export_id"]
    finish(api, csv_id)
    finish(api, json_id)
    rows = {
        r["id"]: r
        for r in csv.DictReader(
            io.StringIO(api.get(f"/v1/requests/exports/{csv_id}/download").text, newline="")
        )
    }
    lines = api.get(f"/v1/requests/exports/{json_id}/download").text.splitlines()
    exact = {line["id"]: line for line in map(json.loads, lines)}

    for rid, (model, error) in formulas.items():
        assert (rows[rid]["model"], rows[rid]["error"]) == (f"'{model}", f"'{error}")
        # Only the spreadsheet format is changed: JSON lines and the API keep the text as is.
        assert (exact[rid]["model"], exact[rid]["error"]) == (model, error)
        assert api.get(f"/v1/requests/{rid}").json()["data"]["model"] == model
    assert (rows["req_f4"]["model"], rows["req_f4"]["error"]) == plain["req_f4"]
