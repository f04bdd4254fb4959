"""Metadata filters through the request_metadata index: pages, copies, tombstones, upgrade."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.pages import walk, walk_while_writing
from tests.collector.request_log.steps import (
    assert_migrations_recorded,
    expected,
    merges_stopped,
    post_batch,
    view_detached,
)
from tests.collector.upgrades import backfill, store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 4, 20, tzinfo=UTC)


def record(i: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"req_{i:04d}",
        # Six hours apart: the records span two monthly partitions.
        "created_at": (START + timedelta(hours=6 * i)).isoformat(),
        "prompt_name": "summary",
        "model": "gpt-4o-mini",
        "input_variables": {"text": f"text {i}"},
        "output": f"output {i}",
        "metadata": {"user_id": f"u{i % 4}", "env": "prod" if i % 3 else "dev"},
    }
    return {**base, **fields}


def varied(i: int) -> dict[str, Any]:
    """Records where status and prompt filters leave few of a user's records."""
    return record(
        i,
        status="error" if i % 11 == 0 else "success",
        prompt_name="rare" if i % 13 == 0 else "summary",
    )


@pytest.mark.parametrize(
    "params",
    [
        {"metadata.user_id": "u1"},
        {"metadata.user_id": "u2", "status": "error"},
        {"metadata.user_id": "u3", "prompt_name": "rare"},
        {"metadata.env": "dev", "status": "error", "prompt_name": "summary"},
        {"metadata.user_id": "u1", "metadata.env": "dev"},
        {"metadata.env": "prod", "metadata.user_id": "u0", "status": "success"},
        {"metadata.user_id": "u2", "start_date": "2026-05-10", "end_date": "2026-06-20"},
        {"metadata.user_id": "u2", "metadata.env": "prod", "start_date": "2026-05-01"},
        {"metadata.user_id": "nobody"},
        {"metadata.missing": "x", "metadata.user_id": "u1"},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_metadata_pages_walk_exactly_the_matching_records(
    api: TestClient, params: dict[str, Any]
) -> None:
    records = [varied(i) for i in range(400)]
    post_batch(api, records)
    want = expected(records, **params)

    for limit in (1, 3, 20, 100):
        assert walk(api, limit, **params) == want


def test_pages_where_the_index_filters_leave_one_in_a_hundred(api: TestClient) -> None:
    # user u1's records: 1,500; of those error and prompt "rare": 11 (every 143rd record).
    records = [
        record(
            i,
            created_at=(START + timedelta(minutes=i)).isoformat(),
            metadata={"user_id": "u1" if i % 4 else "u0"},
            status="error" if i % 11 == 0 else "success",
            prompt_name="rare" if i % 13 == 0 else "summary",
        )
        for i in range(2_000)
    ]
    post_batch(api, records)
    params = {"metadata.user_id": "u1", "status": "error", "prompt_name": "rare"}
    want = expected(records, **params)
    assert 5 < len(want) < 20

    assert walk(api, 2, **params) == want
    # Only the second pair narrows: most index candidates of u1 fail in requests.
    other = {"metadata.user_id": "u1", "metadata.zone": "z"}
    assert walk(api, 5, **other) == []


@pytest.fixture
def no_merges(api: TestClient) -> Iterator[None]:
    """Keep every retried copy and tombstone as its own row, as before a background merge."""
    requests = api.app.state.services.store.requests  # type: ignore[attr-defined]
    with merges_stopped(api, requests.table, requests.items_table, requests.metadata_table):
        yield


def test_retried_copies_show_once_in_metadata_pages(api: TestClient, no_merges: None) -> None:
    records = [varied(i) for i in range(60)]
    for _ in range(3):
        post_batch(api, records)
    # Single records retried too, one copy per insert.
    for i in (5, 9):
        for _ in range(2):
            assert api.post("/v1/requests", json=records[i]).status_code == 201

    for params in ({"metadata.user_id": "u1"}, {"metadata.env": "dev", "metadata.user_id": "u1"}):
        want = expected(records, **params)
        for limit in (1, 2, 7):
            assert walk(api, limit, **params) == want


def test_deleted_records_leave_metadata_pages_at_once(api: TestClient, no_merges: None) -> None:
    records = [varied(i) for i in range(80)]
    post_batch(api, records)
    post_batch(api, records)  # a retried copy under each tombstone as well
    deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u3"}})
    assert deleted.status_code == 200, deleted.text
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"env": "dev", "user_id": "u1"}})
    assert gone.json()["data"]["deleted_count"] == len(
        expected(records, **{"metadata.env": "dev", "metadata.user_id": "u1"})
    )
    live = [r for r in records if r["metadata"]["user_id"] != "u3"]
    live = [
        r for r in live if not (r["metadata"]["user_id"] == "u1" and r["metadata"]["env"] == "dev")
    ]

    assert walk(api, 5, **{"metadata.user_id": "u3"}) == []
    assert walk(api, 3, **{"metadata.user_id": "u1"}) == expected(
        live, **{"metadata.user_id": "u1"}
    )
    assert walk(api, 4, **{"metadata.env": "dev"}) == expected(live, **{"metadata.env": "dev"})


def test_requests_has_the_last_word_over_the_index(api: TestClient) -> None:
    """An index entry whose record is tombstoned in requests never lists the record."""
    records = [varied(i) for i in range(40)]
    post_batch(api, records)
    store = api.app.state.services.store  # type: ignore[attr-defined]
    # Tombstone u2's records in requests alone: the index still holds them as live.
    with view_detached(api, "request_metadata_mv"):
        deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u2"}})
    u2 = expected(records, **{"metadata.user_id": "u2"})
    assert deleted.json()["data"]["deleted_count"] == len(u2)
    index = store.client.query(
        f"SELECT countIf(is_deleted = 0), countIf(is_deleted = 1) "
        f"FROM {store.requests.metadata_table} WHERE key = 'user_id' AND value = 'u2'"
    ).result_rows
    assert index == [(len(u2), 0)]

    assert walk(api, 3, **{"metadata.user_id": "u2"}) == []
    assert walk(api, 3, **{"metadata.user_id": "u0"}) == expected(
        records, **{"metadata.user_id": "u0"}
    )


def test_metadata_cursor_is_stable_while_new_records_arrive(api: TestClient) -> None:
    records = [record(i, metadata={"user_id": "u1"}) for i in range(45)]
    post_batch(api, records)
    want = expected(records, **{"metadata.user_id": "u1"})

    # Each new record is newer than every walked one, of the same user.
    seen = walk_while_writing(
        api,
        10,
        lambda n: record(1_000 + n, metadata={"user_id": "u1"}),
        **{"metadata.user_id": "u1"},
    )

    assert seen == want


def _stored(i: int, user: str) -> RequestRow:
    return RequestRow(
        id=f"req_old{i:03d}",
        created_at=START + timedelta(hours=i),
        prompt_name="old",
        metadata={"user_id": user, "n": i},
    )


def test_records_stored_before_the_index_are_found_after_the_upgrade(settings: Settings) -> None:
    store_before(settings, 4, [_stored(i, f"u{i % 3}") for i in range(30)])

    app = create_app(settings)  # start-up applies the index's migration and its backfill
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        assert walk(api, 4, **{"metadata.user_id": "u1"}) == [
            f"req_old{i:03d}" for i in reversed(range(30)) if i % 3 == 1
        ]
        # A non-string value is matched by its JSON text, as before the index.
        assert walk(api, 4, **{"metadata.n": "7"}) == ["req_old007"]
        # Records logged after the upgrade are indexed by the view.
        post_batch(api, [record(200, metadata={"user_id": "u1"})])
        assert walk(api, 50, **{"metadata.user_id": "u1"})[0] == "req_0200"

        store = app.state.services.store
        # A start-up that ran the backfill but stopped before recording it runs it again:
        # the second copy of every entry must not show.
        store.client.command(backfill(settings, "request_metadata_index"))
        assert walk(api, 3, **{"metadata.user_id": "u1"}) == [
            "req_0200",
            *(f"req_old{i:03d}" for i in reversed(range(30)) if i % 3 == 1),
        ]
    assert_migrations_recorded(settings)  # not run again
