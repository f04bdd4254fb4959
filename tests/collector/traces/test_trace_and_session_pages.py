"""A trace's and a session's pages read their list items from ``thread_items`` (migration 23):
one range read per page, kept sorted by trace and by session. These tests hold those pages
exact through retried copies, tombstones and late records at every page size, show that the
pages come from that table (emptied, they are empty; its backfill fills it again), and that a
store from before migration 23 gets its records copied there when it upgrades."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.traces.steps import log, read_whole, span
from tests.collector.upgrades import backfill, store_before
from tests.keys import DEFAULT_AUTH

NOW = datetime.now(UTC).replace(microsecond=0)
TRACE = "7a" * 16
SESSION = "s-thread"


def _records() -> list[dict[str, Any]]:
    """A trace of 30 records a second apart (every third a tool run, the rest model calls,
    under a chain root), all in one session of user u1 but for record 5 (user u2); plus two
    model calls of the session outside any trace."""
    meta = {"user_id": "u1", "session_id": SESSION}
    at = NOW - timedelta(hours=3)
    records = [span(TRACE, 0, at, kind="chain", parent=None, metadata=meta)] + [
        span(
            TRACE,
            i,
            at + timedelta(seconds=i),
            kind="tool" if i % 3 == 0 else "llm",
            metadata={**meta, "user_id": "u2"} if i == 5 else meta,
            **({"status": "error", "error": "boom"} if i == 7 else {}),
        )
        for i in range(1, 30)
    ]
    records += [
        {
            "id": f"req_alone-{j}",
            "created_at": (at + timedelta(minutes=10 + j)).isoformat(),
            "model": "gpt-4o-mini",
            "usage": {"prompt_tokens": 2, "completion_tokens": 1},
            "metadata": meta,
        }
        for j in range(2)
    ]
    return records


def _ids(items: list[dict[str, Any]]) -> list[str]:
    return [i["id"] for i in items]


def test_trace_and_session_pages_stay_exact_through_copies_tombstones_and_late_records(
    api: TestClient,
) -> None:
    records = _records()
    doomed = (2, 10, 20, len(records) - 1)  # deleted later: tombstones amid the pages
    for i in doomed:
        records[i]["metadata"] = {**records[i]["metadata"], "doomed": "yes"}
    log(api, records)
    log(api, records[:12])  # retried: twelve records twice
    for _ in range(14):  # one record sent 15 times: more copies than a page's fetch
        log(api, [records[3]])
    # A record of the trace that arrives late, older than every other.
    late = span(
        TRACE,
        90,
        NOW - timedelta(hours=4),
        metadata={"user_id": "u1", "session_id": SESSION},
    )
    log(api, [late])
    # Records 2, 10 and 20 of the trace go, and one of the session's outside it.
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == len(doomed)
    live = [late] + [r for i, r in enumerate(records) if i not in doomed]
    in_trace = [r for r in live if r.get("trace_id") == TRACE]
    model_calls = [r for r in live if r.get("kind", "llm") == "llm"]

    for limit in (1, 2, 3, 7, 100):
        trace, _ = read_whole(api, f"/v1/traces/{TRACE}", limit)
        assert _ids(trace["items"]) == _ids(in_trace), limit
        assert trace["records"] == len(in_trace)
        session, _ = read_whole(api, f"/v1/sessions/{SESSION}", limit)
        assert _ids(session["items"]) == _ids(model_calls), limit
        every, _ = read_whole(api, f"/v1/sessions/{SESSION}", limit, kind="all")
        assert _ids(every["items"]) == _ids(live), limit

    # The session's sums are over its live model calls, each once; its users are theirs.
    assert (session["records"], session["errors"]) == (len(model_calls), 1)
    assert session["total_tokens"] == 5 * (len(model_calls) - 1) + 3
    assert session["user_ids"] == ["u1", "u2"]
    assert session["first_at"] == late["created_at"].replace("+00:00", "Z")
    tools = api.get(f"/v1/sessions/{SESSION}", params={"kind": "tool"}).json()["data"]
    assert tools["records"] == len([r for r in live if r.get("kind") == "tool"])
    assert tools["user_ids"] == ["u1"]
    # In the session list too (the period holds every record).
    listed = api.get("/v1/sessions").json()["data"]
    assert [(s["session_id"], s["records"], s["user_ids"]) for s in listed] == [
        (SESSION, len(model_calls), ["u1", "u2"])
    ]
    # Every record of the session deleted: it is gone, as its trace is.
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"session_id": SESSION}})
    assert gone.json()["data"]["deleted_count"] == len(live)
    assert api.get(f"/v1/sessions/{SESSION}").status_code == 404
    assert api.get(f"/v1/traces/{TRACE}").status_code == 404
    assert api.get("/v1/sessions").json()["data"] == []


def test_pages_come_from_thread_items_which_migration_23_fills_for_stored_records(
    api: TestClient, settings: Settings
) -> None:
    """Emptied, the table leaves a trace's and a session's pages without items (they read
    it); its backfill fills it again from the list copy, run twice without harm."""
    records = _records()
    records[6]["metadata"] = {**records[6]["metadata"], "doomed": "yes"}
    log(api, records)
    log(api, records[:3])  # retried
    # A deleted record: its tombstone is copied too, and keeps it out after the backfill.
    gone = api.request("DELETE", "/v1/requests", json={"metadata": {"doomed": "yes"}})
    assert gone.json()["data"]["deleted_count"] == 1
    api.post("/v1/scores", json={"request_id": records[4]["id"], "name": "stars", "value": 4})
    before = (
        read_whole(api, f"/v1/traces/{TRACE}", 7),
        read_whole(api, f"/v1/sessions/{SESSION}", 7, kind="all"),
        api.get("/v1/users", params={"kind": "all"}).json()["data"],
    )
    assert len(before[0][0]["items"]) == 29 and len(before[1][0]["items"]) == 31
    assert [(u["user_id"], u["records"]) for u in before[2]] == [("u1", 30), ("u2", 1)]
    assert records[6]["id"] not in _ids(before[0][0]["items"])
    assert before[1][0]["scores"] == {"stars": 4.0}

    store = api.app.state.services.store
    client, database = store.client, str(store.database)
    client.command(f"TRUNCATE TABLE `{database}`.thread_items")
    assert api.get(f"/v1/traces/{TRACE}").json()["data"]["items"] == []
    assert api.get(f"/v1/sessions/{SESSION}").status_code == 404
    assert api.get("/v1/users", params={"kind": "all"}).json()["data"] == []

    fill = backfill(settings, "thread_items")
    assert "FROM `" + database + "`.request_items" in fill
    client.command(fill)
    client.command(fill)  # run twice (two collectors starting at once): no harm
    after = (
        read_whole(api, f"/v1/traces/{TRACE}", 7),
        read_whole(api, f"/v1/sessions/{SESSION}", 7, kind="all"),
        api.get("/v1/users", params={"kind": "all"}).json()["data"],
    )
    assert after == before


def test_a_store_from_before_migration_23_upgrades_with_its_records_in_thread_items(
    settings: Settings,
) -> None:
    """Records stored at migration 22 (no ``thread_items``) are copied there by the upgrade's
    backfill: their trace and session read whole; records stored after reach it by the view."""
    at = NOW - timedelta(days=1)
    meta = {"user_id": "u9", "session_id": "s-old"}
    rows = [
        RequestRow(
            id=f"req_old-{i:02d}",
            created_at=at + timedelta(seconds=i),
            model="" if i == 0 else "gpt-4o-mini",
            kind="chain" if i == 0 else "llm",
            metadata=meta,
            total_tokens=3,
            trace_id=TRACE,
            span_id=f"{i + 1:016x}",
            parent_span_id="" if i == 0 else f"{1:016x}",
            span_name=f"step-{i}",
        )
        for i in range(25)
    ]
    store_before(settings, 23, rows)
    client = open_client(settings.store_url)
    try:
        db = f"`{settings.database}`"
        tables = {str(r[0]) for r in client.query(f"SHOW TABLES FROM {db}").result_rows}
        assert "thread_items" not in tables
    finally:
        client.close()

    app = create_app(settings)  # start-up applies migration 23: its view and backfill
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        client = app.state.services.store.client
        count = client.query(f"SELECT count() FROM {db}.thread_items").result_rows[0][0]
        assert count == 3 * len(rows)  # each record under its trace, session and user
        trace, pages = read_whole(api, f"/v1/traces/{TRACE}", 10)
        assert pages == 3 and _ids(trace["items"]) == [r.id for r in rows]
        session, _ = read_whole(api, "/v1/sessions/s-old", 10)
        assert _ids(session["items"]) == [r.id for r in rows[1:]]
        assert (session["records"], session["total_tokens"]) == (24, 72)
        since = {"start_date": (at - timedelta(days=1)).isoformat()}
        users = api.get("/v1/users", params=since).json()["data"]
        assert [(u["user_id"], u["records"], u["sessions"], u["total_tokens"]) for u in users] == [
            ("u9", 24, 1, 72)
        ]
        # Records stored from then on reach it through the view.
        log(api, [span(TRACE, 99, NOW, metadata=meta)])
        assert api.get(f"/v1/traces/{TRACE}").json()["data"]["records"] == 26
        assert len(read_whole(api, f"/v1/traces/{TRACE}", 100)[0]["items"]) == 26
        assert len(read_whole(api, "/v1/sessions/s-old", 100)[0]["items"]) == 25


def test_migration_23_on_a_cluster_keeps_each_shard_s_rows_on_that_shard() -> None:
    """On a cluster the table is per shard behind a Distributed table; each shard's view
    reads its own list copy, and the backfill copies shard by shard."""
    (migration,) = [m for m in migrations.MIGRATIONS if m.version == 23]
    table, distributed, view, fill = migrations.migration_statements(migration, "pr", "c")

    assert table.startswith("CREATE TABLE IF NOT EXISTS `pr`.`thread_items_local` ON CLUSTER")
    assert "ReplicatedReplacingMergeTree(" in table and "row_version, is_deleted)" in table
    assert "ORDER BY (project, key, value, created_at, id)" in table
    assert "ENGINE = Distributed(`c`, `pr`, `thread_items_local`, cityHash64(project, id))" in (
        distributed
    )
    assert "TO `pr`.`thread_items_local`" in view and "FROM `pr`.request_items_local)" in view
    assert fill.startswith("INSERT INTO `pr`.`thread_items` (")
    assert "FROM `pr`.request_items)" in fill
    assert "parallel_distributed_insert_select = 2" in fill
    assert "max_threads = 1" in fill
