"""Group commit for the embedded store: many requests' records, one ClickHouse insert.

Each insert into a MergeTree writes a part, so one insert per HTTP request would cap ingest at
a few hundred requests per second and flood the table with tiny parts. Callers hand their rows
to the buffer and wait; a single flusher thread inserts everything pending as one block every
``interval`` seconds (or sooner when ``max_rows`` are waiting) and then releases the callers, so
a request is acknowledged only once its records are stored.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

logger = logging.getLogger("promptrail.ingest")

Rows = Sequence[list[Any]]


class BufferClosed(RuntimeError):
    """The buffer is shut down and takes no more rows."""


class InsertBuffer:
    """A bounded, flushing buffer in front of one insert function."""

    def __init__(
        self,
        insert: Callable[[list[list[Any]]], None],
        interval: float = 0.005,
        max_rows: int = 50_000,
        max_pending_rows: int = 500_000,
    ) -> None:
        self._insert = insert
        self._interval = interval
        self._max_rows = max_rows
        self._max_pending = max_pending_rows
        self._rows: list[list[Any]] = []
        self._waiters: list[Future[None]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="promptrail-insert", daemon=True)
        self._thread.start()

    def submit(self, rows: Rows) -> Future[None]:
        """Queue rows; the future completes once they are stored (or with the insert error)."""
        done: Future[None] = Future()
        with self._cond:
            while len(self._rows) + len(rows) > self._max_pending and not self._closed:
                # Backpressure: a caller waits rather than growing memory without bound.
                self._cond.wait(timeout=0.1)
            if self._closed:
                raise BufferClosed("the collector is shutting down")
            self._rows.extend(rows)
            self._waiters.append(done)
            if len(self._rows) >= self._max_rows:
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
                deadline = time.monotonic() + self._interval
                while not self._closed and len(self._rows) < self._max_rows:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(timeout=left)
                rows, self._rows = self._rows, []
                waiters, self._waiters = self._waiters, []
                closing = self._closed
                self._cond.notify_all()
            if rows:
                self._flush(rows, waiters)
            if closing and not rows:
                return

    def _flush(self, rows: list[list[Any]], waiters: list[Future[None]]) -> None:
        try:
            self._insert(rows)
        except Exception as exc:
            logger.error("insert of %d records failed: %s", len(rows), exc)
            for waiter in waiters:
                waiter.set_exception(exc)
            return
        for waiter in waiters:
            waiter.set_result(None)
