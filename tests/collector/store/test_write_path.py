"""The store's write path: every table declares how it is written, a write answers Stored or a
typed Refused, and the write-behind tries a refused write again until the store takes it.

On the real embedded engine: the store refuses inserts with ClickHouse's own mechanism
(``parts_to_throw_insert``, collector/store/faults.py), never a fake.
"""

from __future__ import annotations

import re
import threading

from promptrail.collector.config import Settings
from promptrail.collector.store.database import Store
from promptrail.collector.store.faults import resume_writes, stall_writes
from promptrail.collector.store.writes import (
    STORED,
    WRITE_PLAN,
    PendingWrites,
    Refused,
    RowWriter,
    Stored,
    WriteOutcome,
)
from promptrail.collector.store.writes.plan import NOT_WRITTEN, REQUEST_LOG, WriteMode
from tests.collector.upgrades import encoded, wide_rows


def test_every_table_of_the_store_declares_how_it_is_written(settings: Settings) -> None:
    store = Store.open(settings.store_url, settings.database)
    try:
        rows = store.client.query(
            "SELECT name, engine, create_table_query FROM system.tables "
            "WHERE database = {db:String}",
            parameters={"db": settings.database},
        ).result_rows
    finally:
        store.close()
    views = [str(query) for _, engine, query in rows if engine == "MaterializedView"]
    # A table a materialized view fills is written by the insert into the view's source.
    filled = {
        target for query in views for target in re.findall(r"\bTO\s+`?[\w]+`?\.`?(\w+)`?", query)
    }
    written = {
        str(name)
        for name, engine, _ in rows
        if engine not in ("MaterializedView", "View") and name not in filled
    }
    declared = {table for group in WRITE_PLAN for table in group.tables}

    assert written - declared - set(NOT_WRITTEN) == set(), "tables with no declared write mode"
    assert declared - written == set(), "declared tables the store does not have"
    # Each table is written one way on a kind of store (the run records share the log's
    # table, and then its writer).
    for table in declared - {"requests"}:
        assert sum(table in group.tables for group in WRITE_PLAN) == 1, table


def test_the_request_log_is_group_committed_embedded_and_batched_by_a_server() -> None:
    assert REQUEST_LOG.mode(embedded=True) is WriteMode.GROUP_COMMIT
    assert REQUEST_LOG.mode(embedded=False) is WriteMode.ASYNC_INSERT


def test_a_write_answers_stored_or_refused_and_recovers_by_itself(settings: Settings) -> None:
    store = Store.open(settings.store_url, settings.database)
    writer = RowWriter.for_group(REQUEST_LOG, store.requests, embedded=True)
    try:
        first = wide_rows("a", 3, 100)
        assert writer.insert(encoded(first), len(first)) == STORED
        assert writer.refusal() is None
        stall_writes(store.client, settings.database, "fail")
        try:
            refused = writer.insert(encoded(wide_rows("b", 3, 100)), 3)
            assert isinstance(refused, Refused)
            assert not refused.busy  # failing, not slower than arrivals: STORE_UNAVAILABLE
            assert refused.message.startswith("records not stored: ")
            assert "TOO_MANY_PARTS" in refused.message
            # Refused at once from now on, and told so before anything is handed over.
            now = writer.refusal()
            assert now is not None and not now.busy and "failing_since" in now.details
            again = writer.insert(encoded(wide_rows("c", 1, 100)), 1)
            assert isinstance(again, Refused) and "store writes failing since" in again.message
        finally:
            resume_writes(store.client, settings.database)
        # The writer's probe (every second) finds the store taking writes again: no restart.
        for _ in range(600):
            if writer.refusal() is None:
                break
            threading.Event().wait(0.05)
        assert writer.refusal() is None
        last = wide_rows("d", 2, 100)
        assert writer.insert(encoded(last), len(last)) == STORED
        stored = store.client.query(
            f"SELECT count() FROM `{settings.database}`.requests WHERE project = 'default'"
        ).result_rows[0][0]
        assert stored == 5  # a, d: nothing of the refused writes
        assert writer.insert(b"[]", 0) == STORED  # no rows: nothing to refuse
    finally:
        writer.close()
        store.close()


def test_the_write_behind_tries_a_refused_write_again_until_it_is_stored() -> None:
    outcomes: list[WriteOutcome] = [
        Refused(busy=True, message="records not stored: buffer full"),
        Refused(busy=False, message="records not stored: store writes failing"),
        STORED,
    ]
    calls: list[WriteOutcome] = []

    def write() -> WriteOutcome:
        outcome = outcomes[len(calls)]
        calls.append(outcome)
        return outcome

    pending = PendingWrites(workers=1, retry_after=0.01)
    try:
        future = pending.submit("default", "record of run req_1", write)
        pending.wait("default", timeout=30)  # a read of the project waits for it
        assert future.done()
        assert calls == outcomes  # both refusals tried again, then stored
        assert isinstance(calls[-1], Stored)
    finally:
        pending.close()
