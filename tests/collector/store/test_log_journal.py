"""The request-log journal's bounds and its file: a full backlog refuses, a read does not wait
for a backlog that is stuck, and under a steady stream the file keeps only what waits
(store/writes/log_journal.py). The inserts here are functions that record what they get and
wait for a release, as the group commit's own tests do."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from promptrail.collector.store.writes.group_commit import BufferFull, WritesFailing
from promptrail.collector.store.writes.log_journal import ROWS, LogJournal, read_frames


class GatedInsert:
    """Records each insert's chunks and blocks until released (or fails when told)."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail = False

    def __call__(self, chunks: Sequence[bytes], settings: dict[str, Any]) -> None:
        assert settings["insert_deduplication_token"].startswith("log/")
        self.calls.append(list(chunks))
        self.started.set()
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeError("store down")


def test_a_full_backlog_refuses_and_a_read_does_not_wait_for_it(tmp_path: Path) -> None:
    insert = GatedInsert()
    journal = LogJournal(tmp_path / "log.journal", insert, max_pending_bytes=8, wait=0.05)
    try:
        journal.submit(b"12345")
        assert insert.started.wait(10)
        # 5 bytes are being inserted: 4 more would go over the 8 the journal may hold.
        with pytest.raises(BufferFull):
            journal.submit(b"6789")
        refusal = journal.refusal()
        assert refusal is not None and refusal.full
        journal.settle(timeout=30)  # returns at once: ingest is refused meanwhile
        assert journal.held_bytes == 5
        insert.release.set()
        while journal.refusal() is not None:  # until the insert under way finished
            threading.Event().wait(0.01)
        journal.settle(timeout=30)
        assert journal.held_bytes == 0
        journal.submit(b"6789")
        journal.settle(timeout=30)
    finally:
        insert.release.set()
        journal.close()
    assert insert.calls == [[b"12345"], [b"6789"]]
    assert (tmp_path / "log.journal").read_bytes() == b""


def test_chunks_waiting_during_an_insert_go_together_in_the_next_one(tmp_path: Path) -> None:
    insert = GatedInsert()
    journal = LogJournal(tmp_path / "log.journal", insert)
    try:
        journal.submit(b"[a]")
        assert insert.started.wait(10)
        journal.submit(b"[b]")
        journal.submit(b"[c]")
        # Answered and kept: both are in the file while the first insert runs.
        frames, _ = read_frames((tmp_path / "log.journal").read_bytes())
        assert [bytes(f[1:]) for f in frames if bytes(f[:1]) == ROWS] == [b"[a]", b"[b]", b"[c]"]
        insert.release.set()
        journal.settle(timeout=30)
    finally:
        insert.release.set()
        journal.close()
    assert insert.calls == [[b"[a]"], [b"[b]", b"[c]"]]


def test_a_failed_insert_refuses_new_chunks_and_is_retried_until_stored(tmp_path: Path) -> None:
    insert = GatedInsert()
    insert.fail = True
    insert.release.set()
    journal = LogJournal(tmp_path / "log.journal", insert, retry_interval=0.05)
    try:
        journal.submit(b"[kept]")
        while journal.refusal() is None:
            threading.Event().wait(0.01)
        with pytest.raises(WritesFailing):
            journal.submit(b"[refused]")
        insert.fail = False
        while journal.refusal() is not None:
            threading.Event().wait(0.01)
        journal.settle(timeout=30)
    finally:
        journal.close()
    assert {tuple(call) for call in insert.calls} == {(b"[kept]",)}  # the same batch, retried
    assert len(insert.calls) >= 2


def test_the_file_keeps_only_what_waits_under_a_steady_stream(tmp_path: Path) -> None:
    """The backlog is never empty, so the file is never emptied: it is rewritten with the
    waiting chunks once it holds enough stored ones."""
    path = tmp_path / "log.journal"
    sizes: list[int] = []
    stored: list[bytes] = []
    journal: LogJournal | None = None

    def insert_and_write_more(chunks: Sequence[bytes], settings: dict[str, Any]) -> None:
        stored.extend(chunks)
        sizes.append(path.stat().st_size)
        assert journal is not None
        if len(stored) < 40:  # the next chunk arrives before this insert returns
            journal.submit(b"[%03d]" % len(stored))

    journal = LogJournal(path, insert_and_write_more, compact_bytes=20)
    try:
        journal.submit(b"[000]")
        while len(stored) < 40:
            journal.settle(timeout=30)
        journal.settle(timeout=30)
    finally:
        journal.close()
    assert stored == [b"[%03d]" % n for n in range(40)]  # each once, in order
    # Rewritten once 20 bytes of stored chunks are in it: it shrinks again and again, and
    # never holds the ~4 KB 40 chunks and their batches' frames would take.
    assert max(sizes) < 400, sizes
    assert sum(later < earlier for earlier, later in pairwise(sizes)) >= 5
    assert path.read_bytes() == b""
