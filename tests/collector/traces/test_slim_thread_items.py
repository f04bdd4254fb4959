"""A session's rows of ``thread_items`` carry no list item (migration 39): the item was
stored once more for every record with a session, twice for one also in a trace. A session's
page takes it from the trace's row of the same record, or from the list copy for a record in
no trace, so its items stay whole and exact through copies, tombstones and pages; and a store
made before migration 39 (every session row with its item) reads the same after it, then mixes
both kinds of rows in one session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store import migrations, sessions
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_rows import RequestRow
from promptrail.collector.store.traces import TraceStore
from tests.collector.traces.steps import log, read_whole, span
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

NOW = datetime.now(UTC).replace(microsecond=0)
TRACE = "5e" * 16
SESSION = "s-slim"


def _session_rows(api: TestClient) -> dict[str, tuple[str, str]]:
    """The session's rows of ``thread_items``: (item, trace id) by record id."""
    store = api.app.state.services.store
    api.app.state.services.records.settle()  # the records acknowledged so far are stored
    rows = store.client.query(
        f"SELECT id, item, trace_id FROM `{store.database}`.thread_items "
        "WHERE key = 'session_id' AND value = {s:String}",
        parameters={"s": SESSION},
    ).result_rows
    return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}


def _by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in items}


def test_a_session_shows_whole_items_whose_rows_point_at_their_trace_or_the_list_copy(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = {"user_id": "u1", "session_id": SESSION}
    at = NOW - timedelta(hours=1)
    traced = [span(TRACE, 0, at, kind="chain", parent=None, metadata=meta)] + [
        span(
            TRACE,
            i,
            at + timedelta(seconds=i),
            kind="tool" if i % 4 == 0 else "llm",
            metadata={**meta, "doomed": "yes"} if i == 6 else meta,
            output={"content": f"answer {i}"},
            input_variables={"q": f"question {i}"},
            **({"status": "error", "error": "boom"} if i == 5 else {}),
        )
        for i in range(1, 12)
    ]
    alone = [
        {
            "id": f"req_alone-{j}",
            "created_at": (at + timedelta(minutes=5 + j)).isoformat(),
            "model": "gpt-4o-mini",
            "output": {"content": f"alone {j}"},
            "usage": {"prompt_tokens": 2, "completion_tokens": 1},
            "metadata": meta,
        }
        for j in range(2)
    ]
    log(api, traced + alone)
    log(api, traced[:5])  # retried: copies of both kinds of rows
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 1

    # The list item is stored on the trace's row alone (and in the list copy).
    rows = _session_rows(api)
    assert {item for item, _ in rows.values()} == {""}
    assert {i for i, (_, trace) in rows.items() if trace != TRACE} == {r["id"] for r in alone}

    live = [r for r in traced if r["id"] != traced[6]["id"]] + alone
    trace, _ = read_whole(api, f"/v1/traces/{TRACE}", 100)
    in_trace = _by_id(trace["items"])
    listed = _by_id(api.get("/v1/requests", params={"kind": "all", "limit": 100}).json()["data"])
    for limit in (1, 3, 100):
        session, _ = read_whole(api, f"/v1/sessions/{SESSION}", limit, kind="all")
        assert [i["id"] for i in session["items"]] == [r["id"] for r in live], limit
        for item in session["items"]:
            # The same item the trace's page and the request list show, field for field.
            assert item == in_trace.get(item["id"], listed[item["id"]]), item["id"]
            assert item == listed[item["id"]], item["id"]
    assert [i["output"] for i in session["items"][1:4]] == [
        {"content": f"answer {i}"} for i in (1, 2, 3)
    ]
    assert session["records"] == len(live) and session["errors"] == 1
    # A session of more rows than one read takes reads its page apart, through the same lookup.
    monkeypatch.setattr(sessions, "_WHOLE_SESSION", 5)
    for limit in (2, 100):
        paged, _ = read_whole(api, f"/v1/sessions/{SESSION}", limit, kind="all")
        assert paged == session, limit


def test_a_store_from_before_migration_39_reads_the_same_after_it(settings: Settings) -> None:
    """Its session rows all carry their items; after the upgrade they read as before, and
    the records stored from then on (rows without items) join them in one session."""
    at = NOW - timedelta(days=1)
    meta = {"user_id": "u9", "session_id": SESSION}
    rows = [
        RequestRow(
            id=f"req_old-{i:02d}",
            created_at=at + timedelta(seconds=i),
            model="" if i == 0 else "gpt-4o-mini",
            kind="chain" if i == 0 else "llm",
            output={"content": f"old {i}"},
            metadata=meta,
            total_tokens=3,
            trace_id=TRACE if i < 8 else "",
            span_id=f"{i + 1:016x}" if i < 8 else "",
            parent_span_id="" if i in (0, 8, 9) else f"{1:016x}",
            span_name=f"step-{i}" if i < 8 else "",
        )
        for i in range(10)
    ]
    store_before(settings, 39, rows)
    client = open_client(settings.store_url)
    try:
        old = TraceStore(client, settings.database)
        before = (
            old.session("default", SESSION, None, None, 100),
            old.trace("default", TRACE, None, 1000),
            old.session_page("default", (at - timedelta(days=1), NOW), None, None, None, 20),
            old.user_page("default", (at - timedelta(days=1), NOW), None, None, 20),
        )
        stored = client.query(
            f"SELECT countIf(item != '') FROM `{settings.database}`.thread_items "
            "WHERE key = 'session_id'"
        ).result_rows[0][0]
        assert stored == len(rows)  # every session row with its item, as before 39
    finally:
        client.close()

    app = create_app(settings)  # start-up applies migration 39
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        store = app.state.services.store
        new = TraceStore(store.client, store.database)
        after = (
            new.session("default", SESSION, None, None, 100),
            new.trace("default", TRACE, None, 1000),
            new.session_page("default", (at - timedelta(days=1), NOW), None, None, None, 20),
            new.user_page("default", (at - timedelta(days=1), NOW), None, None, 20),
        )
        assert after == before
        assert [r.output for r in after[0][2]] == [{"content": f"old {i}"} for i in range(10)]

        # Records stored from then on, in the trace and in none: their session rows point at
        # the trace's rows or the list copy.
        new_records = [
            span(TRACE, 20 + i, NOW - timedelta(minutes=5 - i), metadata=meta)
            | {"output": {"content": f"new {i}"}}
            for i in range(3)
        ] + [
            {
                "id": "req_new-alone",
                "created_at": (NOW - timedelta(minutes=1)).isoformat(),
                "model": "gpt-4o-mini",
                "output": {"content": "new alone"},
                "usage": {"prompt_tokens": 4, "completion_tokens": 1},
                "metadata": meta,
            }
        ]
        log(api, new_records)
        assert sum(1 for item, _ in _session_rows(api).values() if not item) == 4
        session, _ = read_whole(api, f"/v1/sessions/{SESSION}", 4)
        assert [i["output"] for i in session["items"]] == [
            *({"content": f"old {i}"} for i in range(1, 10)),
            *({"content": f"new {i}"} for i in range(3)),
            {"content": "new alone"},
        ]
        assert session["records"] == 13 and session["total_tokens"] == 9 * 3 + 4 * 5


def test_migration_39_gives_the_view_its_query_on_each_shard() -> None:
    """On a cluster the view of each shard reads that shard's list copy; never dropped."""
    (migration,) = [m for m in migrations.MIGRATIONS if m.version == 39]
    (statement,) = migrations.migration_statements(migration, "pr", "c")
    assert statement.startswith("ALTER TABLE `pr`.`thread_items_mv` ON CLUSTER `c` MODIFY QUERY")
    assert "FROM `pr`.request_items_local)" in statement
    assert "if(key = 'trace_id', item, '') AS item" in statement
