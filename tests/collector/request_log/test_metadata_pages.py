"""A metadata page reads its records once, however many windows its candidates came from.

Issue 35.2: a user's page whose newest day holds a few records took its candidates from the
index one window at a time (the day, then the week) and read the records after each window:
two keyed reads of ``request_items`` (~10 ms each at 200k records, however few the keys) for
one page. The candidates are now gathered first and the records read once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.models.requests import MODEL_CALL_KINDS
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.requests import RequestStore
from tests.collector.pages import walk
from tests.collector.request_log.steps import noting_store

NOW = datetime.now(UTC).replace(microsecond=0)


def record(i: int, at: datetime, user: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"req_page_{i:04d}",
        "created_at": at.isoformat(),
        "prompt_name": "summary",
        "model": "gpt-4o-mini",
        "output": f"output {i}",
        "metadata": {"user_id": user, "env": "prod"},
        **fields,
    }


def records() -> list[dict[str, Any]]:
    """User ``u``: 3 records in the newest day, 30 over the week before, 10 older; others
    in between. Every other older record of ``u`` is a span (not a model call), which the
    index does not know and the records refuse."""
    made = []
    for i in range(3):
        made.append(record(i, NOW - timedelta(hours=2 + i), "u"))
    for i in range(30):
        made.append(record(100 + i, NOW - timedelta(days=1, hours=4 * i + 1), "u"))
    for i in range(10):
        kind = {"kind": "chain", "span_id": f"{i:016x}"} if i % 2 else {}
        made.append(record(200 + i, NOW - timedelta(days=20 + i), "u", **kind))
    for i in range(60):
        made.append(record(300 + i, NOW - timedelta(hours=3 * i + 1), f"other-{i % 3}"))
    return made


@pytest.fixture
def store(api: TestClient, settings: Settings) -> Iterator[tuple[RequestStore, list[str]]]:
    """The records of :func:`records` logged, and a store of the test's database whose client
    notes each query it runs (with the lower bound of a windowed read)."""
    response = api.post("/v1/requests/batch", json={"records": records()})
    assert response.status_code == 201, response.text
    with noting_store(settings, lower=True) as noted:
        yield noted


@pytest.mark.cost
def test_a_page_over_two_windows_reads_the_records_once(
    api: TestClient, store: tuple[RequestStore, list[str]]
) -> None:
    want = [
        r["id"]
        for r in sorted(records(), key=lambda r: (r["created_at"], r["id"]), reverse=True)
        if r["metadata"]["user_id"] == "u" and "kind" not in r
    ]
    requests, ran = store

    page = requests.page(
        "default", RequestFilter(metadata={"user_id": "u"}, kinds=MODEL_CALL_KINDS), None, 21
    )

    assert [row.id for row in page] == want[:21]
    reads = [sql for sql in ran if "request_items" in sql]
    assert len(reads) == 1, reads
    # Every page of the walk is exact too, across the windows and below them.
    for limit in (1, 2, 5, 20, 100):
        assert walk(api, limit, **{"metadata.user_id": "u"}) == want


@pytest.mark.cost
def test_a_key_whose_day_fell_short_starts_its_next_page_at_the_week(
    store: tuple[RequestStore, list[str]],
) -> None:
    requests, ran = store
    by_user = RequestFilter(metadata={"user_id": "u"}, kinds=MODEL_CALL_KINDS)

    first = requests.page("default", by_user, None, 21)
    # The day held 3 of the page's 21: the index was read for the day, then the week.
    assert len([sql for sql in ran if "request_metadata" in sql]) == 2
    ran.clear()
    again = requests.page("default", by_user, None, 21)

    assert [row.id for row in again] == [row.id for row in first]
    assert len([sql for sql in ran if "request_metadata" in sql]) == 1, ran
    assert f"lower {(NOW - timedelta(days=1)).date()}" not in " ".join(ran)
    # A key whose day fills a page (every record has env=prod) keeps reading the day first.
    dense = RequestFilter(metadata={"env": "prod"}, kinds=MODEL_CALL_KINDS)
    for _ in range(2):
        ran.clear()
        assert len(requests.page("default", dense, None, 5)) == 5
        index_reads = [sql for sql in ran if "request_metadata" in sql]
        assert len(index_reads) == 1, ran
        assert f"lower {(NOW - timedelta(days=1)).date()}" in index_reads[0]
