"""Request log: logging one and many records, idempotent retries, list filters, detail."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.pages import walk, walk_while_writing
from tests.collector.request_log.steps import ids, record


def log(api: TestClient, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/requests", json=record(**fields))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_logged_record_is_readable_at_once_in_the_detail_shape(api: TestClient) -> None:
    logged = log(
        api,
        timing={"pre_process_ms": 5, "llm_call_ms": 400, "post_process_ms": 15},
        integration={"pre_process_executed": True, "post_process_executed": True, "errors": []},
    )

    detail = api.get(f"/v1/requests/{logged['id']}").json()["data"]

    assert detail == logged
    assert logged["id"].startswith("req_")
    assert "latency_ms" not in detail
    assert detail["output"] == {"content": "ClickHouse is a column store."}
    assert detail["usage"] == {
        "prompt_tokens": 30,
        "completion_tokens": 7,
        "total_tokens": 37,
        "estimated_cost_usd": 0.0004,
        # Counted inside the tokens above (issue 35.4); this call had none.
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert detail["timing"] == {
        "total_latency_ms": 420,
        "pre_process_ms": 5,
        "llm_call_ms": 400,
        "post_process_ms": 15,
    }
    assert detail["integration"] == {
        "pre_process_executed": True,
        "post_process_executed": True,
        "errors": [],
    }
    assert (detail["model"], detail["prompt_name"], detail["version"]) == (
        "gpt-4o-mini",
        "summary",
        2,
    )


def test_list_items_have_the_list_shape(api: TestClient) -> None:
    log(api)

    item = api.get("/v1/requests").json()["data"][0]

    assert set(item) == {
        "id",
        "prompt_name",
        "version",
        "model",
        "status",
        "input_variables",
        "output",
        "metadata",
        "usage",
        "latency_ms",
        "created_at",
        # Whether the model had a price: a cost of 0 is not "free" (issue 30.3).
        "cost_known",
        # The span fields (null outside a trace): a trace's tree from one list call.
        "trace_id",
        "span_id",
        "parent_span_id",
        "span_name",
        # Per score name, the mean or newest category of its scores (issue 31, docs/api-notes.md,
        # "Scores and feedback").
        "scores",
        # llm, embedding or a span kind (issue 32, docs/api-notes.md, "Traces, sessions and users").
        "kind",
        # Where it was logged (issue 47 point 1, docs/api-notes.md, "Environments").
        "environment",
    }
    assert item["scores"] == {}
    assert item["kind"] == "llm"  # logged without one
    assert item["environment"] == "production"  # logged without one
    assert item["model"] == "gpt-4o-mini"
    assert item["usage"] == {"total_tokens": 37, "estimated_cost_usd": 0.0004}
    assert item["latency_ms"] == 420


def test_output_may_be_any_json_object(api: TestClient) -> None:
    logged = log(api, output={"choices": [{"text": "hi"}], "score": 0.9})

    assert api.get(f"/v1/requests/{logged['id']}").json()["data"]["output"] == {
        "choices": [{"text": "hi"}],
        "score": 0.9,
    }


def test_client_chosen_created_at_is_kept(api: TestClient) -> None:
    logged = log(api, created_at="2026-01-02T03:04:05.678Z")

    assert logged["created_at"] == "2026-01-02T03:04:05.678000Z"
    assert api.get(f"/v1/requests/{logged['id']}").json()["data"]["created_at"] == (
        "2026-01-02T03:04:05.678000Z"
    )


def test_unknown_request_is_404(api: TestClient) -> None:
    for request_id in ("req_missing", "req_0190aaaaaaaa0000000000000000000f"):
        response = api.get(f"/v1/requests/{request_id}")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "REQUEST_NOT_FOUND"


# -- idempotency --------------------------------------------------------------------------


@pytest.mark.parametrize("stamped", [True, False])
def test_retried_single_record_is_stored_once(api: TestClient, stamped: bool) -> None:
    fields: dict[str, Any] = {"id": "req_client_1"}
    if stamped:
        fields["created_at"] = "2026-03-01T10:00:00Z"

    first = log(api, **fields)
    second = log(api, **fields)

    assert first == second
    assert ids(api) == ["req_client_1"]


def test_retried_batch_never_duplicates_in_any_read(api: TestClient) -> None:
    batch = {
        "records": [
            record(id=f"req_b{i}", metadata={"run": "r1", "i": str(i)}, output=f"needle {i}")
            for i in range(30)
        ]
    }

    for _ in range(3):
        response = api.post("/v1/requests/batch", json=batch)
        assert response.json()["data"] == {"accepted": 30, "rejected": []}

    assert len(ids(api, limit=100)) == 30
    hits = api.get("/v1/requests/search", params={"query": "needle", "limit": 100}).json()
    assert len(hits["data"]) == 30
    usage = api.get("/v1/requests/analytics", params={"metric": "usage"}).json()["data"]
    assert usage["total"] == 30 * 37


def test_batch_reports_bad_records_and_keeps_the_good(api: TestClient) -> None:
    response = api.post(
        "/v1/requests/batch",
        json={
            "records": [
                record(id="req_ok1"),
                record(status="maybe"),
                "not an object",
                record(id="req_ok2"),
                record(usage={"prompt_tokens": -1}),
            ]
        },
    )

    assert response.status_code == 201
    data = response.json()["data"]
    assert data["accepted"] == 2
    assert [r["index"] for r in data["rejected"]] == [1, 2, 4]
    assert data["rejected"][0]["error"]["code"] == "VALIDATION_ERROR"
    assert data["rejected"][0]["error"]["details"]["field"] == "status"
    assert data["rejected"][2]["error"]["details"]["field"] == "usage.prompt_tokens"
    assert sorted(ids(api)) == ["req_ok1", "req_ok2"]


def test_batch_of_only_bad_records_is_a_400_that_lists_them(api: TestClient) -> None:
    response = api.post("/v1/requests/batch", json={"records": [{"status": 1}]})

    assert response.status_code == 400
    assert response.json()["error"]["details"]["rejected"][0]["index"] == 0
    assert ids(api) == []


def test_gzip_bodies_are_accepted(api: TestClient) -> None:
    body = gzip.compress(json.dumps({"records": [record(id="req_gz")]}).encode())

    response = api.post(
        "/v1/requests/batch",
        content=body,
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )

    assert response.status_code == 201, response.text
    assert ids(api) == ["req_gz"]


def test_batch_over_the_record_limit_is_refused(api: TestClient) -> None:
    limit = api.app.state.services.settings.max_batch_records  # type: ignore[attr-defined]

    response = api.post("/v1/requests/batch", json={"records": [{}] * (limit + 1)})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert ids(api) == []


# -- list ---------------------------------------------------------------------------------


def test_list_filters(api: TestClient) -> None:
    log(api, id="req_a", prompt_name="a", status="success", created_at="2026-05-01T12:00:00Z")
    log(
        api,
        id="req_b",
        prompt_name="b",
        status="error",
        created_at="2026-05-02T12:00:00Z",
        metadata={"user_id": "u2", "environment": "prod"},
    )
    log(
        api,
        id="req_c",
        prompt_name="a",
        created_at="2026-05-03T12:00:00Z",
        metadata={"user_id": "u2", "environment": "dev"},
    )

    assert ids(api) == ["req_c", "req_b", "req_a"]
    assert ids(api, prompt_name="a") == ["req_c", "req_a"]
    assert ids(api, status="error") == ["req_b"]
    assert ids(api, start_date="2026-05-02") == ["req_c", "req_b"]
    assert ids(api, end_date="2026-05-02") == ["req_b", "req_a"]
    assert ids(api, start_date="2026-05-02T00:00:00Z", end_date="2026-05-02T23:00:00+00:00") == [
        "req_b"
    ]
    assert ids(api, **{"metadata.user_id": "u2"}) == ["req_c", "req_b"]
    assert ids(api, **{"metadata.user_id": "u2", "metadata.environment": "prod"}) == ["req_b"]
    assert ids(api, **{"metadata.missing": "x"}) == []
    assert ids(api, prompt_name="a", **{"metadata.user_id": "u2"}) == ["req_c"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "ok"}, "status"),
        ({"start_date": "yesterday"}, "start_date"),
        ({"end_date": "2026-13-01"}, "end_date"),
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"cursor": "nope"}, "cursor"),
        ({"start_date": "2026-05-03", "end_date": "2026-05-01"}, "start_date"),
    ],
)
def test_bad_list_parameters_are_400_naming_the_field(
    api: TestClient, params: dict[str, Any], field: str
) -> None:
    response = api.get("/v1/requests", params=params)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["details"]["field"] == field


def test_cursor_pages_are_stable_while_new_records_arrive(api: TestClient) -> None:
    start = datetime(2026, 6, 1, tzinfo=UTC)
    batch = [
        record(id=f"req_{i:03d}", created_at=(start + timedelta(seconds=i)).isoformat())
        for i in range(45)
    ]
    api.post("/v1/requests/batch", json={"records": batch})
    expected = [f"req_{i:03d}" for i in reversed(range(45))]

    # Newer records land before the first page's position; the walk must not see them.
    seen = walk_while_writing(api, 10, lambda n: record(id=f"req_new{n}"))

    assert seen == expected


def test_pages_never_show_unmerged_duplicates_or_tombstoned_records(api: TestClient) -> None:
    services = api.app.state.services  # type: ignore[attr-defined]
    # Keep every retried copy and tombstone as its own row, as before a background merge.
    for table in (services.store.requests.table, services.store.requests.items_table):
        services.store.client.command(f"SYSTEM STOP MERGES {table}")
    batch = [
        record(id=f"req_d{i:02d}", created_at=f"2026-08-01T00:00:{i:02d}Z", metadata={"n": str(i)})
        for i in range(25)
    ]
    for _ in range(3):
        api.post("/v1/requests/batch", json={"records": batch})
    for i in (3, 4, 17):
        api.request("DELETE", "/v1/requests", json={"metadata": {"n": str(i)}})

    walked = walk(api, 4)
    hits = api.get("/v1/requests/search", params={"query": "column store", "limit": 100})

    expected = [f"req_d{i:02d}" for i in reversed(range(25)) if i not in (3, 4, 17)]
    assert walked == expected
    assert [h["id"] for h in hits.json()["data"]] == expected
    assert api.get("/v1/requests/req_d04").status_code == 404
    assert api.get("/v1/requests/req_d05").json()["data"]["id"] == "req_d05"
