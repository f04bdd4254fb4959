"""Analytics take the request list's filters as query parameters, and refuse what they do not
take (docs/api-notes.md, "Analytics"): a filter is never ignored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.keys import DEFAULT_AUTH

TRACE = "0123456789abcdef0123456789abcdef"

RECORDS = [
    {"prompt_name": "greet", "model": "gpt-4o", "usage": {"prompt_tokens": 10},
     "metadata": {"team": "x"}, "created_at": "2026-07-01T10:00:00Z"},
    {"prompt_name": "greet", "model": "gpt-4o-mini", "status": "error",
     "usage": {"prompt_tokens": 20}, "metadata": {"team": "y"},
     "created_at": "2026-07-01T11:00:00Z"},
    {"prompt_name": "summarise", "model": "gpt-4o", "usage": {"prompt_tokens": 400},
     "metadata": {"team": "x"}, "trace_id": TRACE, "span_id": "0123456789abcdef",
     "created_at": "2026-07-02T09:00:00Z"},
    {"prompt_name": "summarise", "model": "gpt-4o", "usage": {"prompt_tokens": 800},
     "kind": "tool", "trace_id": TRACE, "span_id": "1123456789abcdef",
     "created_at": "2026-07-02T09:00:01Z"},
]  # fmt: skip

PERIOD = {"start_date": "2026-07-01", "end_date": "2026-07-02"}


@pytest.fixture
def loaded(api: TestClient) -> TestClient:
    response = api.post("/v1/requests/batch", json={"records": RECORDS})
    assert response.json()["data"]["accepted"] == len(RECORDS), response.text
    return api


def usage(api: TestClient, **params: Any) -> tuple[float, dict[str, int]]:
    """The usage total and the record count per prompt of an analytics query."""
    response = api.get(
        "/v1/requests/analytics",
        params={"metric": "usage", "group_by": "prompt_name", **PERIOD, **params},
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data["total"], {g["name"]: g["count"] for g in data["groups"]}


def test_prompt_name_counts_only_that_prompts_records(loaded: TestClient) -> None:
    assert usage(loaded, prompt_name="greet") == (30, {"greet": 2})
    assert usage(loaded) == (430, {"summarise": 1, "greet": 2})


def test_over_a_socket_prompt_name_narrows_and_a_typo_is_refused(live_url: str) -> None:
    with httpx.Client(base_url=live_url, headers=DEFAULT_AUTH, timeout=60) as client:
        stored = client.post("/v1/requests/batch", json={"records": RECORDS})
        assert stored.json()["data"]["accepted"] == len(RECORDS), stored.text
        query = {"metric": "usage", **PERIOD}

        narrowed = client.get(
            "/api/v1/requests/analytics", params={**query, "prompt_name": "greet"}
        )
        typo = client.get("/v1/requests/analytics", params={**query, "promptname": "greet"})

    assert narrowed.status_code == 200, narrowed.text
    assert narrowed.json()["data"]["total"] == 30
    assert typo.status_code == 400
    assert typo.json()["error"]["details"]["field"] == "promptname"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"model": "gpt-4o"}, (410, {"summarise": 1, "greet": 1})),
        ({"status": "error"}, (20, {"greet": 1})),
        ({"metadata.team": "y"}, (20, {"greet": 1})),
        ({"kind": "tool"}, (800, {"summarise": 1})),
        ({"trace_id": TRACE}, (1200, {"summarise": 2})),
        ({"trace_id": TRACE, "kind": "llm"}, (400, {"summarise": 1})),
        ({"prompt_name": "greet", "metadata.team": "x"}, (10, {"greet": 1})),
    ],
)
def test_each_list_filter_narrows_analytics(
    loaded: TestClient, params: dict[str, str], expected: tuple[float, dict[str, int]]
) -> None:
    assert usage(loaded, **params) == expected


def test_parameters_and_filters_narrow_together(loaded: TestClient) -> None:
    filters = json.dumps({"model": "gpt-4o"})

    assert usage(loaded, prompt_name="greet", filters=filters) == (10, {"greet": 1})
    # The same key both ways, agreeing, is one filter.
    assert usage(loaded, model="gpt-4o", filters=filters) == (410, {"summarise": 1, "greet": 1})


def test_metric_score_takes_the_parameters_too(loaded: TestClient) -> None:
    rows = loaded.get("/v1/requests", params={"limit": 10}).json()["data"]
    for row in rows:
        response = loaded.post(
            "/v1/scores", json={"request_id": row["id"], "name": "quality", "value": 1.0}
        )
        assert response.status_code in (200, 201), response.text
    response = loaded.get(
        "/v1/requests/analytics",
        params={"metric": "score", "score_name": "quality", "prompt_name": "greet", **PERIOD},
    )

    assert response.status_code == 200, response.text
    assert response.json()["data"]["score_count"] == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"prompt": "greet"}, "prompt"),
        ({"limit": "5"}, "limit"),
        ({"score.quality.min": "0.5"}, "score.quality.min"),
        ({"prompt_name": "greet", "colour": "red"}, "colour"),
        ({"kind": "banana"}, "kind"),
        ({"status": "meh"}, "status"),
        ({"prompt_name": "greet", "filters": '{"prompt_name": "summarise"}'}, "prompt_name"),
        ({"metadata.team": "x", "filters": '{"metadata": {"team": "y"}}'}, "metadata.team"),
    ],
)
def test_a_parameter_analytics_do_not_take_is_a_400_naming_it(
    loaded: TestClient, params: dict[str, str], field: str
) -> None:
    response = loaded.get("/v1/requests/analytics", params={"metric": "usage", **params})

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["field"] == field


def test_every_unknown_parameter_is_named(api: TestClient) -> None:
    response = api.get(
        "/v1/requests/analytics", params={"metric": "usage", "prompt": "a", "team": "x"}
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["details"]["unknown"] == ["prompt", "team"]
    assert "prompt" in error["message"] and "team" in error["message"]
