"""A metadata page reads its records by key without testing their metadata again.

Issue 52.1 (the list by ``metadata.user_id`` right after a load): the keyed read of
``request_items`` tested the filter's metadata pairs on each record's map, a column read for
every keyed granule (a quarter of the read's time at 200k records), though the index had
already vouched for every pair: the driving pair's entries give the candidates and the other
pairs are looked up on the index. The pages stay exactly those of a scan, through retried
copies, tombstones, other pairs that refuse candidates, and kinds the index does not carry.
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
from tests.collector.request_log.steps import expected, merges_stopped, noting_store, post_batch

START = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)


def record(i: int) -> dict[str, Any]:
    """Records over 40 days: four users, two environments, every fifth a span (not listed
    by default: the index does not know kinds, the records refuse them)."""
    made: dict[str, Any] = {
        "id": f"req_keyed_{i:04d}",
        "created_at": (START + timedelta(hours=8 * i)).isoformat(),
        "prompt_name": "summary",
        "model": "gpt-4o-mini",
        "output": f"output {i}",
        "metadata": {"user_id": f"u{i % 4}", "env": "prod" if i % 3 else "dev"},
    }
    if i % 5 == 0:
        made.update(kind="chain", span_id=f"{i:016x}", trace_id=f"{i:032x}")
    return made


@pytest.fixture
def no_merges(api: TestClient) -> Iterator[None]:
    """Every retried copy and tombstone stays its own row, as before a background merge."""
    requests = api.app.state.services.store.requests  # type: ignore[attr-defined]
    with merges_stopped(api, requests.table, requests.items_table, requests.metadata_table):
        yield


@pytest.fixture
def noted(settings: Settings) -> Iterator[tuple[RequestStore, list[str]]]:
    """A store of the test's database whose client notes each query it runs."""
    with noting_store(settings) as noted:
        yield noted


PAIRS = [
    {"metadata.user_id": "u1"},
    {"metadata.user_id": "u2", "metadata.env": "dev"},
    {"metadata.env": "prod", "metadata.user_id": "u3", "status": "success"},
    {"metadata.user_id": "u0", "kind": "all"},
]


def test_pages_through_copies_and_tombstones_read_no_metadata_of_the_records(
    api: TestClient, no_merges: None, noted: tuple[RequestStore, list[str]]
) -> None:
    records = [record(i) for i in range(120)]
    post_batch(api, records)
    post_batch(api, records[::2])  # a retried copy of every other record
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u2"}})
    assert gone.status_code == 200, gone.text
    # A second copy beside a tombstone: a late retry never brings the record back.
    post_batch(api, [r for r in records if r["metadata"]["user_id"] == "u2"][:5])
    live = [r for r in records if r["metadata"]["user_id"] != "u2"]

    for params in PAIRS:
        want = expected(live, **params)  # u2's: none, deleted
        for limit in (1, 3, 7, 20):
            assert walk(api, limit, **params) == want, (params, limit)

    # The store's own page, as the list's first page: the keyed read of the records tests
    # the kinds, not the metadata the index already vouched for.
    requests, ran = noted
    page = requests.page(
        "default", RequestFilter(metadata={"user_id": "u1"}, kinds=MODEL_CALL_KINDS), None, 21
    )
    assert [row.id for row in page] == expected(live, **{"metadata.user_id": "u1"})[:21]
    keyed = [sql for sql in ran if "request_items" in sql]
    assert keyed and all("metadata_map" not in sql for sql in keyed), keyed
    assert all("kind IN" in sql for sql in keyed), keyed
