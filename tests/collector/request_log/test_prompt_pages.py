"""Lists by prompt through the prompt index (migration 40): pages, copies, tombstones, upgrade.

A list by prompt read ``request_items`` newest first until a page of the prompt's records
turned up: a prompt behind one record in a few hundred read further back the bigger the log
(issue 52.5: 4.9 s p95 at 10M records). It now reads the prompt's entries of
``request_prompts`` newest first, then only the records it shows, by key; its pages and
cursors stay those of a scan.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.metadata_index import REQUEST_PROMPTS, REQUEST_PROMPTS_MV
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.requests import RequestStore
from promptrail.collector.store.schema import Backfill, render
from tests.collector.pages import walk, walk_while_writing
from tests.collector.request_log.steps import (
    assert_migrations_recorded,
    expected,
    merges_stopped,
    noting_store,
    post_batch,
    view_detached,
)
from tests.collector.upgrades import backfill, insert_rows, store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 4, 20, tzinfo=UTC)
MODEL_CALLS = ("llm", "embedding")


def record(i: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"req_{i:04d}",
        # Five hours apart: the records span three monthly partitions.
        "created_at": (START + timedelta(hours=5 * i)).isoformat(),
        "prompt_name": "summary",
        "model": "gpt-4o-mini",
        "output": f"output {i}",
        "metadata": {"user_id": f"u{i % 4}"},
    }
    return {**base, **fields}


def varied(i: int) -> dict[str, Any]:
    """Prompts one in 7 and 13 (and none one in 17), two models, errors one in 11, a tool span
    one in 9 and a staging record one in 5, so each filter beside the prompt leaves some out."""
    fields: dict[str, Any] = {
        "prompt_name": "rare" if i % 13 == 0 else "mid" if i % 7 == 0 else "summary",
        "model": "gpt-4o" if i % 3 == 0 else "gpt-4o-mini",
        "status": "error" if i % 11 == 0 else "success",
    }
    if i % 17 == 0:
        fields["prompt_name"] = ""
    if i % 9 == 0:
        fields.update(kind="tool", span_id=f"{i:016x}", trace_id=f"{i:032x}")
    if i % 5 == 0:
        fields["environment"] = "staging"
    return record(i, **fields)


@pytest.mark.parametrize(
    "params",
    [
        {"prompt_name": "summary"},
        {"prompt_name": "rare"},
        {"prompt_name": "mid", "status": "error"},
        {"prompt_name": "summary", "kind": "all"},
        {"prompt_name": "rare", "kind": "tool"},
        {"prompt_name": "summary", "environment": "staging"},
        {"prompt_name": "mid", "start_date": "2026-05-10", "end_date": "2026-06-20"},
        {"prompt_name": "summary", "status": "error", "kind": "all"},
        {"prompt_name": "nobody"},
    ],
    ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()),
)
def test_prompt_pages_walk_exactly_the_matching_records(
    api: TestClient, params: dict[str, Any]
) -> None:
    records = [varied(i) for i in range(400)]
    post_batch(api, records)
    want = expected(records, **params)

    for limit in (1, 3, 20, 100):
        assert walk(api, limit, **params) == want


def test_the_service_s_own_environments_stay_hidden_unless_named(
    api: TestClient, settings: Settings
) -> None:
    records = [record(i) for i in range(30)]
    post_batch(api, records)
    # An experiment's record of the same prompt, as the service logs it.
    insert_rows(
        settings,
        [
            RequestRow(
                id="req_experiment",
                created_at=START + timedelta(days=30),
                prompt_name="summary",
                environment="promptrail-experiment",
            )
        ],
    )

    assert walk(api, 4, prompt_name="summary") == expected(records, prompt_name="summary")
    assert walk(api, 4, prompt_name="summary", environment="promptrail-experiment") == [
        "req_experiment"
    ]


@pytest.fixture
def no_merges(api: TestClient) -> Iterator[None]:
    """Keep every retried copy and tombstone as its own row, as before a background merge."""
    requests = api.app.state.services.store.requests  # type: ignore[attr-defined]
    with merges_stopped(api, requests.table, requests.items_table, requests.prompts_table):
        yield


def test_retried_copies_and_deleted_records_in_prompt_pages(
    api: TestClient, no_merges: None
) -> None:
    records = [varied(i) for i in range(90)]
    for _ in range(3):
        post_batch(api, records)
    for i in (5, 8):
        assert api.post("/v1/requests", json=records[i]).status_code == 201
    deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u3"}})
    assert deleted.status_code == 200, deleted.text
    live = [r for r in records if r["metadata"]["user_id"] != "u3"]

    for params in ({"prompt_name": "summary"}, {"prompt_name": "mid", "kind": "all"}):
        want = expected(live, **params)
        assert want
        for limit in (1, 2, 7):
            assert walk(api, limit, **params) == want


def test_the_records_have_the_last_word_over_the_prompt_index(api: TestClient) -> None:
    """An index entry whose record is tombstoned in requests alone never lists the record."""
    records = [varied(i) for i in range(60)]
    post_batch(api, records)
    with view_detached(api, "request_prompts_mv"):
        deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u2"}})
    assert deleted.status_code == 200, deleted.text
    live = [r for r in records if r["metadata"]["user_id"] != "u2"]

    assert walk(api, 3, prompt_name="summary") == expected(live, prompt_name="summary")


def test_prompt_cursor_is_stable_while_new_records_arrive(api: TestClient) -> None:
    records = [record(i) for i in range(45)]
    post_batch(api, records)

    seen = walk_while_writing(api, 10, lambda n: record(1_000 + n), prompt_name="summary")

    assert seen == expected(records, prompt_name="summary")


@pytest.mark.cost
def test_a_prompt_page_reads_the_prompt_index_then_its_records_by_key(
    api: TestClient, settings: Settings
) -> None:
    # One record in 50 of the log names the prompt: a scan of the records newest first read
    # fifty times the page.
    records = [record(i, prompt_name="rare" if i % 50 == 0 else "other") for i in range(2_000)]
    post_batch(api, records)
    with noting_store(settings) as (requests, ran):
        page = requests.page(
            "default", RequestFilter(prompt_name="rare", kinds=MODEL_CALLS), None, 21
        )

    assert [row.id for row in page] == expected(records, prompt_name="rare")[:21]
    assert any("request_prompts" in sql for sql in ran), ran
    items = [sql for sql in ran if "request_items" in sql]
    assert len(items) == 1 and "(created_at, id) IN" in items[0], items


def test_the_prompt_index_takes_the_store_s_other_column_filters(
    api: TestClient, settings: Settings
) -> None:
    """The model filter of the store's reads (exports take it; the list does not) as well."""
    records = [varied(i) for i in range(200)]
    post_batch(api, records)
    client = open_client(settings.clickhouse_url)
    try:
        store = RequestStore(client, settings.database)
        for model in ("gpt-4o", "gpt-4o-mini"):
            by_model = RequestFilter(prompt_name="summary", model=model, kinds=MODEL_CALLS)
            want = [
                id_
                for id_ in expected(records, prompt_name="summary")
                if any(r["id"] == id_ and r["model"] == model for r in records)
            ]
            assert [row.id for row in store.page("default", by_model, None, 500)] == want
    finally:
        close_client(client)


def _stored(i: int) -> RequestRow:
    return RequestRow(
        id=f"req_old{i:03d}",
        created_at=START + timedelta(hours=i),
        prompt_name="old" if i % 3 else "older",
        model="gpt-4o-mini",
        status="error" if i % 4 == 0 else "success",
    )


def test_records_stored_before_the_prompt_index_are_listed_after_the_upgrade(
    settings: Settings,
) -> None:
    store_before(settings, 40, [_stored(i) for i in range(40)])
    old = [f"req_old{i:03d}" for i in reversed(range(40)) if i % 3]

    app = create_app(settings)  # start-up applies the index's migration and its backfill
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        assert walk(api, 4, prompt_name="old") == old
        assert walk(api, 3, prompt_name="old", status="error") == [
            id_ for id_ in old if int(id_[-3:]) % 4 == 0
        ]
        # Records logged after the upgrade are indexed by the view.
        post_batch(api, [record(200, prompt_name="old")])
        assert walk(api, 50, prompt_name="old") == ["req_0200", *old]

        store = app.state.services.store
        # A start-up that ran the backfill but stopped before recording it runs it again:
        # the second copy of every entry must not show.
        store.client.command(backfill(settings, "request_prompt_index"))
        assert walk(api, 3, prompt_name="old") == ["req_0200", *old]
    assert_migrations_recorded(settings)  # not run again


def test_the_prompt_index_lives_on_the_record_s_shard_on_a_cluster() -> None:
    local, distributed = render(REQUEST_PROMPTS, "promptrail", "main")
    (view,) = render(REQUEST_PROMPTS_MV, "promptrail", "main")
    (backfill,) = render(Backfill(REQUEST_PROMPTS_MV, REQUEST_PROMPTS), "promptrail", "main")

    assert "ORDER BY (project, prompt_name, created_at, id)" in local
    assert "ReplicatedReplacingMergeTree(" in local and "row_version, is_deleted)" in local
    # With the record's sharding key: a record's entry and the record share a shard, so the
    # keyed read of the records after the index finds each on the shard that listed it.
    assert distributed.endswith("`request_prompts_local`, cityHash64(project, id))")
    assert "TO `promptrail`.`request_prompts_local`\n" in view
    assert "FROM `promptrail`.requests_local WHERE prompt_name != ''" in view
    assert backfill.startswith("INSERT INTO `promptrail`.`request_prompts` (project, ")
    assert "FROM `promptrail`.requests WHERE prompt_name != ''" in backfill
    assert backfill.endswith("SETTINGS parallel_distributed_insert_select = 2")
