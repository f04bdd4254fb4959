"""The group-commit buffer: one insert for many callers, acknowledged only once stored."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from promptrail.collector.config import Settings
from promptrail.collector.store.database import Store
from promptrail.collector.store.writes.group_commit import (
    BufferClosed,
    BufferFull,
    InsertBuffer,
)
from tests.collector.upgrades import assert_stored_whole, encoded, wide_rows


class GatedInsert:
    """An insert function that records its calls and blocks until released."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[bytes]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def __call__(self, rows: list[bytes]) -> None:
        self.calls.append(rows)
        self.started.set()
        assert self.release.wait(10)
        if self.fail:
            raise RuntimeError("store down")


def test_chunks_waiting_during_an_insert_go_together_in_the_next_one() -> None:
    insert = GatedInsert()
    buffer = InsertBuffer(insert)
    try:
        first = buffer.submit(b"a")
        assert insert.started.wait(10)
        # The flusher is busy with "a": these two gather and are inserted as one block.
        second, third = buffer.submit(b"b1,b2"), buffer.submit(b"c")
        assert not first.done()
        insert.release.set()
        for future in (first, second, third):
            future.result(timeout=10)
    finally:
        buffer.close()

    assert insert.calls == [[b"a"], [b"b1,b2", b"c"]]


def test_a_failed_insert_fails_every_caller_of_that_block() -> None:
    insert = GatedInsert(fail=True)
    buffer = InsertBuffer(insert)
    try:
        first = buffer.submit(b"a")
        assert insert.started.wait(10)
        insert.release.set()
        with pytest.raises(RuntimeError, match="store down"):
            first.result(timeout=10)
    finally:
        buffer.close()


def test_a_chunk_bigger_than_the_pending_limit_is_still_taken_alone() -> None:
    insert = GatedInsert()
    insert.release.set()
    buffer = InsertBuffer(insert, max_bytes=4, max_pending_bytes=8)
    try:
        buffer.submit(b"x" * 100).result(timeout=10)
    finally:
        buffer.close()

    assert insert.calls == [[b"x" * 100]]


def test_one_insert_takes_at_most_max_bytes_of_what_is_pending() -> None:
    insert = GatedInsert()
    buffer = InsertBuffer(insert, max_bytes=4)
    try:
        first = buffer.submit(b"a")
        assert insert.started.wait(10)
        later = [buffer.submit(chunk) for chunk in (b"bb", b"cc", b"ddd")]
        insert.release.set()
        for future in (first, *later):
            future.result(timeout=10)
    finally:
        buffer.close()

    assert insert.calls == [[b"a"], [b"bb", b"cc"], [b"ddd"]]


def test_close_stores_what_is_pending_and_refuses_more() -> None:
    insert = GatedInsert()
    buffer = InsertBuffer(insert)
    pending: Future[None] = buffer.submit(b"a")
    insert.release.set()

    buffer.close()

    pending.result(timeout=10)
    with pytest.raises(BufferClosed):
        buffer.submit(b"b")


def test_batches_inserted_together_are_all_stored_whole(settings: Settings) -> None:
    # Batches of ~1.5 MiB: the insert streams them in 1 MiB pieces, cut inside records.
    batches = [wide_rows(f"b{b}", 100, 15_000) for b in range(3)]
    store = Store.open(settings.store_url, settings.database)
    try:
        store.requests.insert([encoded(batch) for batch in batches])
        for batch in batches:
            assert_stored_whole(store, batch)
        count = store.client.query(
            f"SELECT count() FROM `{settings.database}`.requests WHERE project = 'default'"
        ).result_rows[0][0]
        assert count == 300
    finally:
        store.close()


def test_rows_taken_back_before_their_insert_are_never_inserted() -> None:
    # A request that gives up waiting answers 503 "not stored": that must stay true.
    insert = GatedInsert()
    buffer = InsertBuffer(insert)
    try:
        first = buffer.submit(b"a")
        assert insert.started.wait(10)
        second = buffer.submit(b"b")

        assert buffer.withdraw(second) is True
        assert buffer.withdraw(first) is False  # its insert began: its outcome decides
        insert.release.set()
        first.result(timeout=10)
    finally:
        buffer.close()

    assert insert.calls == [[b"a"]]
    assert buffer.held_bytes == 0


def test_a_full_buffer_refuses_after_its_wait_and_counts_the_insert_under_way() -> None:
    insert = GatedInsert()
    buffer = InsertBuffer(insert, max_pending_bytes=8, wait=0.05)
    try:
        first = buffer.submit(b"12345")
        assert insert.started.wait(10)
        # 5 bytes are being inserted: 4 more would go over the 8 the buffer may hold.
        with pytest.raises(BufferFull):
            buffer.submit(b"6789")
        refusal = buffer.refusal()
        assert refusal is not None and refusal.full
        insert.release.set()
        first.result(timeout=10)
        assert buffer.refusal() is None  # an insert finished: room again
        buffer.submit(b"6789").result(timeout=10)
    finally:
        buffer.close()
