"""Delete by metadata and analytics (docs/api-notes.md, "Request log")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.request_log.analytics_steps import DATA, PERIOD, batch

# -- delete -------------------------------------------------------------------------------


def test_delete_removes_records_matching_every_pair_from_every_read(api: TestClient) -> None:
    batch(
        api,
        [
            {"id": "req_1", "output": "gone one", "metadata": {"user_id": "u1", "env": "prod"}},
            {"id": "req_2", "output": "gone two", "metadata": {"user_id": "u1", "env": "prod"}},
            {"id": "req_3", "output": "kept three", "metadata": {"user_id": "u1", "env": "dev"}},
            {"id": "req_4", "output": "kept four", "metadata": {"user_id": "u2"}},
        ],
    )

    response = api.request(
        "DELETE", "/v1/requests", json={"metadata": {"user_id": "u1", "env": "prod"}}
    )

    assert response.status_code == 200
    data = response.json()["data"]
    assert data["deleted_count"] == 2
    assert data["deleted_at"].endswith("Z")
    assert sorted(r["id"] for r in api.get("/v1/requests").json()["data"]) == ["req_3", "req_4"]
    assert api.get("/v1/requests/req_1").status_code == 404
    assert [
        h["id"] for h in api.get("/v1/requests/search", params={"query": "gone"}).json()["data"]
    ] == []
    errors = api.get(
        "/v1/requests/analytics", params={"metric": "usage", "group_by": "metadata.env"}
    )
    assert {g["name"]: g["count"] for g in errors.json()["data"]["groups"]} == {"dev": 1, "": 1}


def test_a_late_retry_does_not_bring_a_deleted_record_back(api: TestClient) -> None:
    record = {"id": "req_r", "created_at": "2026-01-01T00:00:00Z", "metadata": {"user_id": "u9"}}
    batch(api, [record])
    api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u9"}})

    batch(api, [record])

    assert api.get("/v1/requests/req_r").status_code == 404


def test_delete_with_nothing_matching_counts_zero(api: TestClient) -> None:
    batch(api, [{"id": "req_x", "metadata": {"user_id": "u1"}}])

    response = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "nobody"}})

    assert response.json()["data"]["deleted_count"] == 0
    assert api.get("/v1/requests/req_x").status_code == 200


@pytest.mark.parametrize("body", [None, {}, {"metadata": {}}, {"metadata": None}])
def test_delete_never_deletes_everything(api: TestClient, body: dict[str, Any] | None) -> None:
    batch(api, [{"id": "req_x", "metadata": {"user_id": "u1"}}])

    response = api.request("DELETE", "/v1/requests", json=body)

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "metadata"
    assert api.get("/v1/requests/req_x").status_code == 200


def test_another_projects_delete_touches_nothing(api: TestClient) -> None:
    batch(api, [{"id": "req_x", "metadata": {"user_id": "u1"}}])
    other = api.app.state.services.keys.create("other")  # type: ignore[attr-defined]

    response = api.request(
        "DELETE",
        "/v1/requests",
        json={"metadata": {"user_id": "u1"}},
        headers={"Authorization": f"Bearer {other}"},
    )

    assert response.json()["data"]["deleted_count"] == 0
    assert api.get("/v1/requests/req_x").status_code == 200


# -- analytics ------------------------------------------------------------------------------


def analytics(api: TestClient, **params: Any) -> dict[str, Any]:
    response = api.get("/v1/requests/analytics", params={**PERIOD, **params})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def groups(data: dict[str, Any]) -> list[tuple[str, float, int]]:
    return [(g["name"], g["value"], g["count"]) for g in data["groups"]]


@pytest.fixture
def loaded(api: TestClient) -> TestClient:
    batch(api, DATA)
    return api


@pytest.mark.parametrize(
    ("metric", "total", "by_prompt"),
    [
        ("cost", 1.75, [("b", 1.0, 1), ("a", 0.75, 2)]),
        ("usage", 175, [("b", 150, 1), ("a", 25, 2)]),
        ("latency", 200, [("a", 200, 2), ("b", 200, 1)]),
        ("errors", 1, [("a", 1, 2), ("b", 0, 1)]),
    ],
)
def test_every_metric_total_and_groups(
    loaded: TestClient, metric: str, total: float, by_prompt: list[tuple[str, float, int]]
) -> None:
    data = analytics(loaded, metric=metric, group_by="prompt_name")

    assert data["metric"] == metric
    assert data["total"] == pytest.approx(total)
    assert groups(data) == [(n, pytest.approx(v), c) for n, v, c in by_prompt]
    assert data["period"] == {
        "start": "2026-07-01T00:00:00Z",
        "end": "2026-07-02T23:59:59.999000Z",
    }


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        ("model", [("claude-sonnet-4", 150, 1), ("gpt-4o", 25, 2)]),
        ("status", [("success", 170, 2), ("error", 5, 1)]),
        ("version", [("1", 170, 2), ("2", 5, 1)]),
        ("day", [("2026-07-02", 150, 1), ("2026-07-01", 25, 2)]),
        ("hour", [("2026-07-02T09:00:00Z", 150, 1), ("2026-07-01T10:00:00Z", 20, 1),
                  ("2026-07-01T11:00:00Z", 5, 1)]),
        ("metadata.team", [("x", 170, 2), ("y", 5, 1)]),
    ],
)  # fmt: skip
def test_every_group_by_sorted_by_value(
    loaded: TestClient, group_by: str, expected: list[tuple[str, float, int]]
) -> None:
    assert groups(analytics(loaded, metric="usage", group_by=group_by)) == expected


def test_latency_groups_report_percentiles(loaded: TestClient) -> None:
    by_model = {
        g["name"]: g for g in analytics(loaded, metric="latency", group_by="model")["groups"]
    }

    # Nearest rank: of two latencies, the median is the lower one, p95 and p99 the higher.
    assert by_model["claude-sonnet-4"]["p50"] == 200
    assert (by_model["gpt-4o"]["p50"], by_model["gpt-4o"]["p95"]) == (100, 300)
    assert by_model["gpt-4o"]["p99"] == 300


def test_latency_percentiles_are_within_half_a_percent_of_exact(api: TestClient) -> None:
    latencies = [37 * i + i * i for i in range(1, 401)]  # 38 ms to 176 s, uneven gaps
    batch(
        api,
        [
            {"prompt_name": "p", "latency_ms": ms, "created_at": "2026-07-01T10:00:00Z"}
            for ms in latencies
        ],
    )

    (group,) = analytics(api, metric="latency", group_by="prompt_name")["groups"]

    for level in (50, 95, 99):
        exact = sorted(latencies)[-(-level * len(latencies) // 100) - 1]  # nearest rank
        assert group[f"p{level}"] == pytest.approx(exact, rel=0.005)


def test_filters_narrow_the_aggregation(loaded: TestClient) -> None:
    filters = json.dumps({"model": "gpt-4o", "metadata": {"team": "x"}})

    data = analytics(loaded, metric="cost", group_by="prompt_name", filters=filters)

    assert data["total"] == pytest.approx(0.25)
    assert groups(data) == [("a", pytest.approx(0.25), 1)]


def test_period_defaults_to_the_last_30_days(api: TestClient) -> None:
    batch(api, [{"usage": {"prompt_tokens": 1}}, {"usage": {"prompt_tokens": 2},
                "created_at": "2020-01-01T00:00:00Z"}])  # fmt: skip

    response = api.get("/v1/requests/analytics", params={"metric": "usage"})

    data = response.json()["data"]
    assert data["total"] == 1
    assert data["groups"] == []
    from datetime import datetime

    start = datetime.fromisoformat(data["period"]["start"])
    end = datetime.fromisoformat(data["period"]["end"])
    assert (end - start).days == 30


def test_empty_period_has_zero_totals(api: TestClient) -> None:
    data = analytics(api, metric="latency", group_by="model")

    assert (data["total"], data["groups"]) == (0, [])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "metric"),
        ({"metric": "speed"}, "metric"),
        ({"metric": "cost", "group_by": "colour"}, "group_by"),
        ({"metric": "cost", "group_by": "metadata."}, "group_by"),
        ({"metric": "cost", "start_date": "last week"}, "start_date"),
        ({"metric": "cost", "start_date": "2026-02-01", "end_date": "2026-01-01"}, "start_date"),
        ({"metric": "cost", "filters": "{not json"}, "filters"),
        ({"metric": "cost", "filters": "[1]"}, "filters"),
        ({"metric": "cost", "filters": '{"colour": 1}'}, "filters"),
        ({"metric": "cost", "filters": '{"status": "meh"}'}, "filters.status"),
        ({"metric": "cost", "filters": '{"metadata": 3}'}, "filters.metadata"),
    ],
)
def test_bad_analytics_parameters(api: TestClient, params: dict[str, Any], field: str) -> None:
    response = api.get("/v1/requests/analytics", params=params)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["details"]["field"] == field
