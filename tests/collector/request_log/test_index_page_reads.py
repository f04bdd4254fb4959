"""A user's page whose records are a third spans reads the records once (issue 52.5).

The metadata index does not carry the record kind, and a list shows model calls: of a
user's entries, the spans (an agent run and its tools, 3 records in 10 of a trace) are
candidates the records refuse. A page read as many records as it lacked, so each read of
``request_items`` (~10-15 ms at 10M records however few its keys) left it short and the next
read followed: three to four reads for a page of 20. It now reads half as many again at
once when the page has a filter the index does not carry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.models.requests import MODEL_CALL_KINDS
from promptrail.collector.store.request_filters import RequestFilter
from tests.collector.pages import walk
from tests.collector.request_log.steps import noting_store

NOW = datetime.now(UTC).replace(microsecond=0)


def traced(i: int) -> dict[str, Any]:
    """Record ``i`` of user ``u``'s traces of 10: an agent run, its calls and two tools."""
    position = i % 10
    record: dict[str, Any] = {
        "id": f"req_t{i:04d}",
        "created_at": (NOW - timedelta(minutes=10 * i)).isoformat(),
        "prompt_name": "plan",
        "model": "gpt-4o-mini",
        "output": f"output {i}",
        "metadata": {"user_id": "u"},
        "trace_id": f"{i // 10 + 1:032x}",
        "span_id": f"{i + 1:016x}",
    }
    if position in (0, 3, 6):
        record.update(kind="agent" if position == 0 else "tool", model="")
    return record


def test_a_user_page_a_third_spans_reads_the_records_once(
    api: TestClient, settings: Settings
) -> None:
    records = [traced(i) for i in range(120)]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text
    calls = [r["id"] for r in records if "kind" not in r]
    with noting_store(settings) as (store, ran):
        by_user = RequestFilter(metadata={"user_id": "u"}, kinds=MODEL_CALL_KINDS)
        page = store.page("default", by_user, None, 21)

    assert [row.id for row in page] == calls[:21]
    reads = [sql for sql in ran if "request_items" in sql]
    assert len(reads) == 1, reads
    # And every page of a walk over the API is exact.
    for limit in (1, 4, 20, 100):
        assert walk(api, limit, **{"metadata.user_id": "u"}) == calls
    assert walk(api, 7, **{"metadata.user_id": "u"}, kind="all") == [r["id"] for r in records]
