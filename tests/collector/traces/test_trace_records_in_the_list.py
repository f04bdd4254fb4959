"""One trace's records through the public list: the trace_id filter and the span fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.pages import walk
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 5, 2, 9, tzinfo=UTC)
TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(trace: str, i: int, parent: int | None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": f"req_{trace[:6]}-{i:02d}",
        "created_at": (START + timedelta(minutes=i)).isoformat(),
        "model": "gpt-4o-mini",
        "output": {"content": f"step {i}"},
        "trace_id": trace,
        "span_id": f"{i:016x}",
        "span_name": f"step-{i}",
        **extra,
    }
    if parent is not None:
        record["parent_span_id"] = f"{parent:016x}"
    return record


def test_a_trace_lists_exactly_its_records_page_by_page_with_their_spans(
    api: TestClient,
) -> None:
    # 7 spans of one trace among another trace's and records outside any trace.
    mine = [span(TRACE, i, None if i == 0 else (i - 1) // 2) for i in range(7)]
    others = [span(OTHER, i, None) for i in range(5)]
    later = (START + timedelta(hours=1)).isoformat()
    plain = [{"id": f"req_plain-{i}", "created_at": later} for i in range(5)]
    response = api.post("/v1/requests/batch", json={"records": mine + others + plain})
    assert response.json()["data"] == {"accepted": 17, "rejected": []}

    expected = [r["id"] for r in reversed(mine)]
    assert walk(api, 3, trace_id=TRACE) == expected  # 3 pages through the cursor
    assert walk(api, 100, trace_id=TRACE, status="success") == expected

    items = api.get("/v1/requests", params={"trace_id": TRACE, "limit": 100}).json()["data"]
    by_id = {item["id"]: item for item in items}
    assert by_id["req_0af765-05"] == {
        **by_id["req_0af765-05"],
        "trace_id": TRACE,
        "span_id": "0000000000000005",
        "parent_span_id": "0000000000000002",
        "span_name": "step-5",
    }
    assert by_id["req_0af765-00"]["parent_span_id"] is None  # the root

    # Outside any trace, a list item says so with nulls.
    plain_item = api.get("/v1/requests", params={"limit": 1}).json()["data"][0]
    assert plain_item["id"].startswith("req_plain-")
    assert {plain_item[k] for k in ("trace_id", "span_id", "parent_span_id", "span_name")} == {None}


def test_a_trace_id_with_no_records_is_an_empty_list(api: TestClient) -> None:
    api.post("/v1/requests/batch", json={"records": [span(OTHER, 0, None)]})
    body = api.get("/v1/requests", params={"trace_id": "f" * 32}).json()
    assert body["data"] == [] and body["pagination"]["has_more"] is False


def test_a_malformed_trace_id_is_a_400_naming_it(api: TestClient) -> None:
    for bad in ("ABC", "0AF7651916CD43DD8448EB211C80319C", "x" * 32, TRACE + "0"):
        response = api.get("/v1/requests", params={"trace_id": bad})
        assert response.status_code == 400, bad
        error = response.json()["error"]
        assert error["code"] == "VALIDATION_ERROR" and error["details"]["field"] == "trace_id"


def test_records_stored_before_the_trace_columns_list_by_trace_after_the_upgrade(
    settings: Settings,
) -> None:
    rows = [
        RequestRow(
            id=f"req_old-span-{i}",
            created_at=START + timedelta(seconds=i),
            trace_id=TRACE if i < 3 else OTHER,
            span_id=f"{i:016x}",
            parent_span_id="" if i == 0 else f"{0:016x}",
            span_name=f"old-{i}",
        )
        for i in range(5)
    ]
    items = f"`{settings.database}`.request_items"
    # The items copy as the release before migration 12 made it.
    undo = [
        f"ALTER TABLE {items} DROP INDEX idx_trace",
        f"ALTER TABLE {items} DROP COLUMN trace_id",
        f"ALTER TABLE {items} DROP COLUMN trace",
    ]
    store_before(settings, 12, rows, undo)

    app = create_app(settings)  # start-up applies migration 12
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        listed = api.get("/v1/requests", params={"trace_id": TRACE}).json()["data"]
        assert [(r["id"], r["span_name"], r["parent_span_id"]) for r in listed] == [
            ("req_old-span-2", "old-2", "0000000000000000"),
            ("req_old-span-1", "old-1", "0000000000000000"),
            ("req_old-span-0", "old-0", None),
        ]
