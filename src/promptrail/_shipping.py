"""The shipper: ended capture spans wait in a bounded queue; one thread turns them into
records and hands them to the exporter.

The application's thread only appends to a deque (and counts); everything else — building
the record, masking, JSON, gzip, the HTTP post and its retries — happens on the shipper's
thread. This is the part of the SDK's BatchSpanProcessor capture needs, without its per-span
locking and condition signalling (why: docs/architecture.md, "Capture path").
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from ._process import Sampler, forget_after_fork, restart_after_fork
from ._spans import CaptureSpan
from ._stats import CaptureStats
from .otel import PromptrailSpanExporter

logger = logging.getLogger("promptrail")

_BATCH = 512


class SpanShipper:
    """Queue ended spans and ship them as records in the background."""

    def __init__(
        self,
        exporter: PromptrailSpanExporter,
        stats: CaptureStats,
        *,
        sample_rate: float = 1.0,
        max_queue_size: int = 10_000,
        flush_interval: float = 1.0,
    ) -> None:
        self._exporter = exporter
        self._stats = stats
        self._sampler = Sampler(sample_rate)
        self._max = max(1, max_queue_size)
        self._batch = min(_BATCH, self._max)
        self._interval = flush_interval
        self._warned = False
        self._start()
        restart_after_fork(self)

    def _start(self) -> None:
        self._queue: deque[CaptureSpan] = deque()
        self._wake = threading.Event()
        self._stopping = False
        # Held while spans are turned into records and sent: a flush waits for the batch
        # the worker has taken, so "flushed" means every span ended before it was shipped.
        self._drain_lock = threading.Lock()
        self._worker = threading.Thread(target=self._run, name="promptrail-shipper", daemon=True)
        self._worker.start()

    def _after_fork(self) -> None:
        # The parent's queue and thread are the parent's: the child starts with its own.
        self._start()

    @property
    def queued(self) -> int:
        """Spans waiting to become records."""
        return len(self._queue)

    def on_end(self, span: CaptureSpan) -> None:
        """Take an ended span (runs in the application's thread: keep it cheap)."""
        if not self._sampler.keeps(span.trace_id):
            self._stats.add("sampled_out")
            return
        # Counted as captured when shipped (or dropped): no lock in the application's thread.
        queue = self._queue
        if len(queue) >= self._max:
            self._drop_full()
            return
        queue.append(span)
        if len(queue) >= self._batch and not self._wake.is_set():
            self._wake.set()

    def _drop_full(self) -> None:
        self._stats.add("captured")
        self._stats.drop("queue_full")
        if not self._warned:
            self._warned = True
            logger.warning(
                "promptrail: capture queue full (%d); dropping new records "
                "(counted in promptrail.stats())",
                self._max,
            )

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._interval)
            self._wake.clear()
            try:
                self._drain()
            except Exception:  # never let the thread die: the next round retries
                logger.exception("promptrail: shipping failed")

    def _drain(self) -> bool:
        """Ship every queued span; False if the collector could not take them all."""
        with self._drain_lock:
            queue = self._queue
            ok = True
            while queue:
                batch = [queue.popleft() for _ in range(min(self._batch, len(queue)))]
                self._stats.add("captured", len(batch))
                ok = self._exporter.ship([span.to_record() for span in batch]) and ok
            return ok

    def flush(self, timeout: float) -> bool:
        """Ship what is queued and everything pending; False if ``timeout`` ran out first."""
        drained = self._drain()
        return self._exporter.force_flush(int(timeout * 1000)) and drained

    def shutdown(self, timeout: float) -> None:
        """Stop the thread, ship what is left within ``timeout``, count what could not go."""
        forget_after_fork(self)
        self._exporter.stop_retrying()
        self._stopping = True
        self._wake.set()
        self._worker.join(timeout)

        def finish() -> None:
            self._drain()
            self._exporter.shutdown(int(timeout * 1000))

        closer = threading.Thread(target=finish, name="promptrail-shutdown", daemon=True)
        closer.start()
        closer.join(timeout + 0.5)
        left = len(self._queue)
        if left:
            self._stats.drop("shutdown_unsent", left)
            logger.warning("promptrail: %d records not sent before shutdown", left)
