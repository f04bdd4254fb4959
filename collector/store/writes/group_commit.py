"""Group commits for the embedded store: many writers' rows, one ClickHouse insert.

Two shapes, for two kinds of writer:

- :class:`InsertBuffer` (the request log): rows arrive already encoded, from any number of
  requests at once, and a flusher thread of its own inserts what is pending. It is bounded
  and refuses rows when the store does not keep up (below).
- :class:`LeaderCommit` (the registry): each writer's rows come from a decision taken under a
  lock of its caller (a version number, a name's claim), and the statements are built from the
  whole batch; the first writer finding no commit under way stores every queued writer's rows
  in one call (the leader), the others wait for it. No thread of its own, no bound: a writer
  waits for the commit before it, and the registry's journal bounds what waits behind it.

The request log's buffer:

Each insert into a MergeTree writes a part, so one insert per HTTP request would cap ingest at
a few hundred requests per second and flood the table with tiny parts. Callers hand their
encoded rows to the buffer and wait; a single flusher thread inserts everything pending as one
block every ``interval`` seconds (or sooner when ``max_bytes`` are waiting) and then releases
the callers, so a request is acknowledged only once its records are stored.

While one insert runs, the next requests' rows gather, so under load each insert carries
several batches: the window grows with the insert's own duration.

The buffer is bounded (docs/deploy.md, "When the store stalls"): it holds at most
``max_pending_bytes`` of records, those waiting and those being inserted. A caller finding it
full waits up to ``wait`` seconds for room, then is refused (:class:`BufferFull`); once an
insert failed, callers are refused at once (:class:`WritesFailing`) and the flusher probes the
store with an insert of no rows (ClickHouse runs its too-many-parts checks on those too) until
one succeeds. A refused caller's rows were never handed to the store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .refusals import RefusingWriter

logger = logging.getLogger("promptrail.ingest")


class BufferClosed(RuntimeError):
    """The buffer is shut down and takes no more rows."""


class BufferFull(RuntimeError):
    """No room for the rows: the store takes records slower than they arrive."""


class WritesFailing(RuntimeError):
    """The store's last write failed; rows are refused until a probe succeeds."""


class InsertBuffer(RefusingWriter):
    """A bounded, flushing buffer of encoded rows in front of one insert function.

    Rows arrive as byte chunks in the store's insert format; a flush hands up to
    ``max_bytes`` of pending chunks (at least one) to ``insert`` in one call, which bounds
    the memory one insert takes. ``probe`` (an insert of no rows) tells when a failing store
    takes writes again.
    """

    def __init__(
        self,
        insert: Callable[[list[bytes]], None],
        interval: float = 0.005,
        max_bytes: int = 32 << 20,
        max_pending_bytes: int = 96 << 20,
        wait: float = 5.0,
        probe: Callable[[], None] | None = None,
        probe_interval: float = 1.0,
    ) -> None:
        self._insert = insert
        self._interval = interval
        self._max_bytes = max(1, min(max_bytes, max_pending_bytes // 2))
        self._max_pending = max_pending_bytes
        self._wait = wait
        self._probe = probe
        self._probe_interval = probe_interval
        self._chunks: list[bytes] = []
        self._size = 0  # bytes of the chunks waiting
        self._inserting = 0  # bytes of the insert under way
        self._waiters: list[Future[None]] = []
        self._init_refusals()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="promptrail-insert", daemon=True)
        self._thread.start()

    @property
    def held_bytes(self) -> int:
        """Bytes of records in the buffer: waiting, and being inserted."""
        return self._size + self._inserting

    def submit(self, chunk: bytes) -> Future[None]:
        """Queue rows (never empty); the future completes once they are stored or failed.

        Raises :class:`WritesFailing` while the store refuses writes, and :class:`BufferFull`
        when no room frees within the buffer's wait.
        """
        done: Future[None] = Future()
        deadline = time.monotonic() + self._wait
        with self._cond:
            while True:
                if self._closed:
                    raise BufferClosed("the collector is shutting down")
                if self._failing_since is not None:
                    raise WritesFailing(self._failing_message())
                held = self.held_bytes
                if not held or held + len(chunk) <= self._max_pending:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    self._full = True
                    raise BufferFull(self._full_message())
                # Backpressure: a caller waits a little rather than growing memory.
                self._cond.wait(timeout=min(left, 0.1))
            if not self.held_bytes:
                self._progress_at = time.monotonic()
            self._chunks.append(chunk)
            self._size += len(chunk)
            self._waiters.append(done)
            if len(self._chunks) == 1 or self._size >= self._max_bytes:
                self._cond.notify_all()
        return done

    def withdraw(self, waiter: Future[None]) -> bool:
        """Take back rows not handed to the store yet; False once their insert began."""
        with self._cond:
            for index, queued in enumerate(self._waiters):
                if queued is waiter:
                    self._size -= len(self._chunks.pop(index))
                    del self._waiters[index]
                    self._cond.notify_all()
                    return True
        return False

    def close(self, timeout: float = 30.0) -> None:
        """Flush what is pending and stop the flusher."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._chunks:
                    if self._failing_since is None or self._probe is None:
                        self._cond.wait()
                    elif not self._cond.wait(timeout=self._probe_interval):
                        break  # time to probe the failing store
                deadline = time.monotonic() + self._interval
                while not self._closed and self._chunks and self._size < self._max_bytes:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(timeout=left)
                taken, size = 0, 0
                while taken < len(self._chunks) and (
                    not taken or size + len(self._chunks[taken]) <= self._max_bytes
                ):
                    size += len(self._chunks[taken])
                    taken += 1
                chunks, self._chunks = self._chunks[:taken], self._chunks[taken:]
                waiters, self._waiters = self._waiters[:taken], self._waiters[taken:]
                self._size -= size
                self._inserting = size
                closing = self._closed
                probe = self._probe if self._failing_since is not None and not closing else None
                self._cond.notify_all()
            if chunks:
                self._flush(chunks, waiters)
            elif probe is not None:
                self._attempt(probe)
            if closing and not chunks:
                return

    def _flush(self, chunks: list[bytes], waiters: list[Future[None]]) -> None:
        error = self._attempt(lambda: self._insert(chunks))
        if error is not None:
            logger.error("insert of %d batches failed: %s", len(chunks), error)
        for waiter in waiters:
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    def _attempt(self, write: Callable[[], None]) -> Exception | None:
        """Run a write; record whether the store takes writes; return its failure."""
        try:
            write()
        except Exception as exc:
            with self._cond:
                self._inserting = 0
                self._insert_failed(exc)
            return exc
        with self._cond:
            self._inserting = 0
            self._insert_stored()
        return None


@dataclass
class Queued:
    """One writer's part of a :class:`LeaderCommit`: ``done`` once committed, with the
    commit's ``error`` if it failed."""

    done: bool = field(default=False, init=False)
    error: BaseException | None = field(default=None, init=False)


_Q = TypeVar("_Q", bound=Queued)


class LeaderCommit(Generic[_Q]):
    """Writers' rows stored together by whichever writer finds no commit under way.

    ``cond`` is the caller's lock: a writer enqueues holding it, right after the decision its
    rows record, so rows reach the store in the order those decisions were taken.
    """

    def __init__(self, cond: threading.Condition) -> None:
        self.cond = cond
        self._queue: list[_Q] = []
        self._busy = False
        self.in_flight = 0  # writers queued or being committed

    def enqueue(self, item: _Q) -> _Q:
        """Queue a writer's rows (holding :attr:`cond`)."""
        self._queue.append(item)
        self.in_flight += 1
        return item

    def commit(
        self,
        item: _Q,
        run: Callable[[list[_Q]], None],
        settled: Callable[[list[_Q], BaseException | None], None] | None = None,
    ) -> None:
        """Return once ``item`` is stored; raise what storing it raised.

        The first waiter finding no commit under way stores everything queued in one
        ``run(batch)``, then calls ``settled(batch, error)`` holding :attr:`cond`; the others
        wait for it, and the next leader takes whatever queued meanwhile.
        """
        with self.cond:
            while not item.done and self._busy:
                self.cond.wait()
            leader = not item.done
            if leader:
                self._busy = True
                batch, self._queue = self._queue, []
        if leader:
            error: BaseException | None = None
            try:
                run(batch)
            except BaseException as exc:
                error = exc
            with self.cond:
                for queued in batch:
                    queued.done, queued.error = True, error
                if settled is not None:
                    settled(batch, error)
                self.in_flight -= len(batch)
                self._busy = False
                self.cond.notify_all()
        if item.error is not None:
            raise item.error
