"""The embedded store's request-log journal: a batch is answered once it is in the journal's
file and stored right behind; every read of the log waits for what was answered before it; a
killed process's records are stored by the next one, each once (store/writes/log_journal.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from promptrail.collector.config import Settings
from promptrail.collector.runtime_file import read_runtime
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.faults import stall_writes
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.requests import RequestStore
from promptrail.collector.store.writes.log_journal import (
    APPLIED,
    BATCH,
    ROWS,
    LogJournal,
    frame,
    read_frames,
)
from tests.collector.processes import collector
from tests.collector.upgrades import assert_stored_whole, encoded, wide_rows
from tests.stalls import Live, live_collector

# Each insert of the log waits this long in ClickHouse's insert throttling, so every read of
# the test follows its record's answer while the record is still unstored (a read is sent
# milliseconds after the answer, well under a second even on a loaded machine). Each of the
# eight reads waits out one stall: 3 s made the test ~25 s.
STALL_SECONDS = 1.0


def framed(kind: bytes, data: bytes) -> bytes:
    return b"".join(frame(kind, data))


def live_count(store: Store, database: str) -> int:
    """The log's records as every read counts them: copies of one key are one record."""
    rows = store.client.query(
        f"SELECT count() FROM `{database}`.requests FINAL WHERE project = 'default'"
    ).result_rows
    return int(rows[0][0])


def test_a_killed_process_s_journal_is_stored_once_and_its_torn_tail_dropped(
    settings: Settings, tmp_path: Path
) -> None:
    first, second, torn = (wide_rows(p, 40, 300) for p in ("jA", "jB", "jC"))
    store = Store.open(settings.store_url, settings.database)
    try:
        # The killed process had stored batch b1 (first) but not marked it applied, had
        # appended second (no batch took it yet), and died in the middle of appending torn.
        store.requests.insert([encoded(first)])
        path = tmp_path / "log.journal"
        path.write_bytes(
            framed(ROWS, encoded(first))
            + framed(BATCH, json.dumps(["b1", 1]).encode())
            + framed(ROWS, encoded(second))
            + framed(ROWS, encoded(torn))[:-5]
        )

        LogJournal(path, store.requests.insert).close()

        assert path.read_bytes() == b""
        assert_stored_whole(store, first)
        assert_stored_whole(store, second)
        assert store.requests.get("default", torn[0].id) is None  # never acknowledged
        # b1 went in twice: the log keeps each record once (ids and times are the records').
        assert live_count(store, settings.database) == len(first) + len(second)
        listed = store.requests.page("default", RequestFilter(), None, 100)
        assert len(listed) == len(first) + len(second)
        assert len({row.id for row in listed}) == len(listed)
    finally:
        store.close()


def test_a_batch_marked_applied_is_not_stored_again(settings: Settings, tmp_path: Path) -> None:
    done, waiting = wide_rows("jD", 20, 100), wide_rows("jE", 20, 100)
    inserted: list[int] = []
    store = Store.open(settings.store_url, settings.database)
    try:
        path = tmp_path / "log.journal"
        path.write_bytes(
            framed(ROWS, encoded(done))
            + framed(BATCH, json.dumps(["b1", 1]).encode())
            + framed(ROWS, encoded(waiting))
            + framed(APPLIED, b"b1")
        )

        def insert(chunks: Any, settings: dict[str, Any]) -> None:
            inserted.append(len(chunks))
            store.requests.insert(chunks, settings)

        LogJournal(path, insert).close()

        assert inserted == [1]  # the waiting chunk alone
        assert_stored_whole(store, waiting)
        assert store.requests.get("default", done[0].id) is None
    finally:
        store.close()


@pytest.fixture
def live(settings: Settings) -> Iterator[Live]:
    with live_collector(settings) as collector:
        yield collector


def _record(request_id: str, trace: str, session: str) -> dict[str, Any]:
    return {
        "id": request_id,
        "created_at": datetime.now(UTC).isoformat(),
        "model": "gpt-4o-mini",
        "output": {"content": f"answer of {request_id} journalword{request_id[-4:]}"},
        "usage": {"prompt_tokens": 2, "completion_tokens": 1},
        "trace_id": trace,
        "span_id": uuid.uuid4().hex[:16],
        "metadata": {"session_id": session, "user_id": f"u_{session}"},
    }


def _tokens(live: Live) -> float:
    answer = live.get("/v1/requests/analytics?metric=usage")
    assert answer.status_code == 200, answer.text
    return float(answer.json()["data"]["total"])


def test_a_record_answered_before_it_is_stored_is_in_every_read_that_follows(
    live: Live,
) -> None:
    assert live.services.records.journaled
    live.post(_record("req_seed_j", uuid.uuid4().hex, "s_seed"))  # the table holds a part
    tokens = _tokens(live)
    # Each insert now waits in ClickHouse's own insert throttling: answers come first.
    live.stall("slow", seconds=STALL_SECONDS)
    reads = {
        "list": lambda rid, trace, session: "/v1/requests?limit=100",
        "detail": lambda rid, trace, session: f"/v1/requests/{rid}",
        "metadata": lambda rid, trace, session: f"/v1/requests?metadata.session_id={session}",
        "search": lambda rid, trace, session: f"/v1/requests/search?query=journalword{rid[-4:]}",
        "trace": lambda rid, trace, session: f"/v1/traces/{trace}",
        "session": lambda rid, trace, session: f"/v1/sessions/{session}?kind=all",
        "sessions": lambda rid, trace, session: "/v1/sessions?kind=all",
    }
    try:
        for n, (name, path) in enumerate(reads.items()):
            rid, trace, session = f"req_j{n:04d}", uuid.uuid4().hex, f"s_j{n}"
            answer = live.post(_record(rid, trace, session))
            assert answer.status_code == 201, answer.text
            if n == 0:
                # Answered while its insert waits: the journal still holds it.
                assert live.services.records.held_bytes > 0
            read = live.get(path(rid, trace, session))
            assert read.status_code == 200, (name, read.text)
            assert (session if name == "sessions" else rid) in read.text, name
        rid = "req_j_tokens"
        assert live.post(_record(rid, uuid.uuid4().hex, "s_tokens")).status_code == 201
        assert _tokens(live) == tokens + 3 * (len(reads) + 1)
    finally:
        live.resume()


def test_the_first_record_after_the_store_began_failing_is_kept_and_the_next_refused(
    live: Live,
) -> None:
    """The collector learns that inserts fail from its next insert: a record answered before
    that is kept in the journal and stored once the store is back; from then on records are
    refused (503) until the store takes inserts again."""
    assert live.post(_record("req_before_f", uuid.uuid4().hex, "s")).status_code == 201
    live.services.records.settle()
    stall_writes(live.store, live.database, "fail")  # unknown to the collector so far
    kept = live.post(_record("req_kept_f", uuid.uuid4().hex, "s"))
    assert kept.status_code == 201, kept.text
    while httpx.get(f"{live.url}/health").status_code == 200:
        threading.Event().wait(0.05)  # until the journal's insert of it failed
    refused = live.post(_record("req_refused_f", uuid.uuid4().hex, "s"))
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "STORE_UNAVAILABLE"
    live.resume()
    live.wait_ready()
    assert sorted(live.stored_ids()) == ["req_before_f", "req_kept_f"]


def _reset_stall(data_dir: Path) -> None:
    """Give the log its insert limits back in a process of its own (the store's lock is free
    once the collector is dead), so the next start's replay is not throttled."""
    code = (
        "from promptrail.collector.store.connection import open_client; "
        "from promptrail.collector.store.faults import resume_writes; "
        f"c = open_client('chdb://{data_dir / 'clickhouse'}'); "
        "resume_writes(c, 'promptrail'); c.close()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_records_acknowledged_before_a_sigkill_are_all_there_once_after_the_restart(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    acknowledged: list[str] = []
    env = {"PROMPTRAIL_FAULT_INJECTION": "1"}
    journal = tmp_path / "clickhouse" / "request-journal" / "promptrail.journal"
    with collector(tmp_path, log, env) as api:
        info = read_runtime(tmp_path)
        assert info is not None
        seed = api.post("/v1/requests", json=_record("req_k_seed", uuid.uuid4().hex, "s"))
        assert seed.status_code == 201, seed.text
        stalled = api.post(
            "/v1/admin/store/stall",
            json={"mode": "slow", "seconds": 30},
            headers={"X-Promptrail-Admin": info.admin_token},
        )
        assert stalled.status_code == 200, stalled.text
        for b in range(6):
            batch = [_record(f"req_k{b}-{i:03d}", uuid.uuid4().hex, "s") for i in range(50)]
            answer = api.post("/v1/requests/batch", json={"records": batch})
            assert answer.status_code in (200, 201), answer.text
            acknowledged += [r["id"] for r in batch]
        # Every insert waits 30 s in the throttling: the answered records are in the file.
        frames, _ = read_frames(journal.read_bytes())
        assert sum(bytes(f[:1]) == ROWS for f in frames) >= 1
        os.kill(info.pid, signal.SIGKILL)
    _reset_stall(tmp_path)
    with collector(tmp_path, log, env) as api:
        ids: list[str] = []
        cursor = None
        while True:
            page = api.get(
                "/v1/requests", params={"limit": 100, **({"cursor": cursor} if cursor else {})}
            ).json()
            ids += [item["id"] for item in page["data"]]
            cursor = page["pagination"].get("next_cursor")
            if not cursor:
                break
        assert sorted(set(acknowledged) - set(ids)) == []
        assert len(ids) == len(set(ids))  # each once
    # The second collector stopped cleanly: everything stored, the file emptied.
    assert journal.read_bytes() == b""
    assert "exit=0" in log[-1]


def test_a_server_store_keeps_no_journal(settings: Settings) -> None:
    # On a ClickHouse server (any number of stateless collectors) records are answered once
    # inserted: only a chDB path has a journal.
    client = open_client(settings.store_url)
    try:
        assert RequestStore(client, settings.database).journal_path() is not None
        assert RequestStore(client, settings.database, cluster="c").journal_path() is None
    finally:
        close_client(client)
