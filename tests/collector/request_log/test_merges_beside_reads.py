"""The embedded store merges on one thread, two merges at a time.

Issue 52.1 (the list by ``metadata.user_id`` right after a load): the journal's large inserts
leave large merges right after a load, and on two merge threads they took both cores of a
two-core machine from the reads beside them. The engine now merges on one thread, its
executor interleaving two merges so that a long one does not hold back a small one; a store
written while merges run still reads exactly (the request-log tests' pages), and its parts
are merged.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from tests.collector.request_log.steps import expected, post_batch


def test_merges_run_on_one_thread_two_at_a_time(api: TestClient) -> None:
    client = api.app.state.services.store.client  # type: ignore[attr-defined]
    settings = dict(
        client.query(
            "SELECT name, value FROM system.server_settings WHERE name IN "
            "('background_pool_size', 'background_merges_mutations_concurrency_ratio')"
        ).result_rows
    )
    assert settings == {
        "background_pool_size": "1",
        "background_merges_mutations_concurrency_ratio": "2",
    }
    # How many merges may be under way at once (threads times the ratio).
    limit = client.query(
        "SELECT value FROM system.metrics WHERE metric = 'BackgroundMergesAndMutationsPoolSize'"
    ).result_rows
    assert limit == [(2,)]


def test_a_log_written_in_many_parts_merges_and_lists_exactly(
    api: TestClient, settings: Settings
) -> None:
    records = [
        {
            "id": f"req_merge_{i:04d}",
            "created_at": f"2026-05-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
            "prompt_name": "summary",
            "model": "gpt-4o-mini",
            "output": f"output {i}",
            "metadata": {"user_id": f"u{i % 3}"},
        }
        for i in range(60)
    ]
    for start in range(0, 60, 6):  # ten inserts: ten parts of each table to merge
        post_batch(api, records[start : start + 6])
    # A read waits for the journal's inserts: every record is in the tables after it.
    assert api.get("/v1/requests", params={"limit": 1}).status_code == 200
    store = api.app.state.services.store  # type: ignore[attr-defined]
    table = store.requests.items_table
    # The merges run in the background on their one thread: OPTIMIZE waits for one of
    # its own, which the executor schedules beside any under way.
    store.client.command(f"OPTIMIZE TABLE {table} FINAL")
    parts = store.client.query(
        "SELECT count() FROM system.parts WHERE active AND database = {db:String} "
        "AND table = {t:String}",
        parameters={"db": settings.database, "t": "request_items"},
    ).result_rows
    assert parts == [(1,)]

    for user in ("u0", "u1", "u2"):
        page = api.get("/v1/requests", params={"metadata.user_id": user, "limit": 100})
        assert [r["id"] for r in page.json()["data"]] == expected(
            records, **{"metadata.user_id": user}
        )
