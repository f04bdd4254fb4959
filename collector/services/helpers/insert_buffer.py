"""Group commit for the embedded store: many requests' records, one ClickHouse insert.

Each insert into a MergeTree writes a part, so one insert per HTTP request would cap ingest at
a few hundred requests per second and flood the table with tiny parts. Callers hand their
encoded rows to the buffer and wait; a single flusher thread inserts everything pending as one
block every ``interval`` seconds (or sooner when ``max_bytes`` are waiting) and then releases
the callers, so a request is acknowledged only once its records are stored.

While one insert runs, the next requests' rows gather, so under load each insert carries
several batches: the window grows with the insert's own duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

logger = logging.getLogger("promptrail.ingest")


class BufferClosed(RuntimeError):
    """The buffer is shut down and takes no more rows."""


class InsertBuffer:
    """A bounded, flushing buffer of encoded rows in front of one insert function.

    Rows arrive as byte chunks in the store's insert format; a flush hands up to
    ``max_bytes`` of pending chunks (at least one) to ``insert`` in one call, which bounds
    the memory one insert takes.
    """

    def __init__(
        self,
        insert: Callable[[list[bytes]], None],
        interval: float = 0.005,
        max_bytes: int = 32 << 20,
        max_pending_bytes: int = 64 << 20,
    ) -> None:
        self._insert = insert
        self._interval = interval
        self._max_bytes = max_bytes
        self._max_pending = max_pending_bytes
        self._chunks: list[bytes] = []
        self._size = 0
        self._waiters: list[Future[None]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="promptrail-insert", daemon=True)
        self._thread.start()

    def submit(self, chunk: bytes) -> Future[None]:
        """Queue rows (never empty); the future completes once they are stored or failed."""
        done: Future[None] = Future()
        with self._cond:
            while self._chunks and self._size + len(chunk) > self._max_pending:
                if self._closed:
                    break
                # Backpressure: a caller waits rather than growing memory without bound.
                self._cond.wait(timeout=0.1)
            if self._closed:
                raise BufferClosed("the collector is shutting down")
            self._chunks.append(chunk)
            self._size += len(chunk)
            self._waiters.append(done)
            if len(self._chunks) == 1 or self._size >= self._max_bytes:
                self._cond.notify_all()
        return done

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
                    self._cond.wait()
                deadline = time.monotonic() + self._interval
                while not self._closed and self._size < self._max_bytes:
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
                closing = self._closed
                self._cond.notify_all()
            if chunks:
                self._flush(chunks, waiters)
            if closing and not chunks:
                return

    def _flush(self, chunks: list[bytes], waiters: list[Future[None]]) -> None:
        try:
            self._insert(chunks)
        except Exception as exc:
            logger.error("insert of %d batches failed: %s", len(chunks), exc)
            for waiter in waiters:
                waiter.set_exception(exc)
            return
        for waiter in waiters:
            waiter.set_result(None)
