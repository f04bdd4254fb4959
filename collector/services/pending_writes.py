"""Write-behind for run records, with read-your-writes for every read of this collector.

A run answers its caller as soon as the provider's answer is priced; its record is stored
right after, on a small worker pool, instead of the caller waiting for the insert (most of a
run's own cost on the embedded store). Reads of the request log first wait for the project's
records still being stored, so anything a client saw finish is in every list, detail, search,
export, analytics and delete that follows it on this collector. Shutdown drains the pool
before the store closes, so a graceful stop loses nothing.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures

from ..errors import StoreUnavailable

logger = logging.getLogger("promptrail.runs")

# A read waits at most this long for pending records, then reads what is stored.
_READ_WAIT = 10.0
# Retries of a failed store, so a brief store hiccup does not lose a record.
_RETRY_DELAYS = (0.1, 0.5, 2.0)
# A store that refuses writes for now (a 503: stalled, failing, its buffer full) is retried at
# its Retry-After for this long before the record is given up (docs/deploy.md): runs are
# refused while ingest is, so only the records of runs under way when it stalled wait here.
_STORE_PATIENCE = 600.0


class PendingWrites:
    """Records acknowledged to their writer and still being stored, per project."""

    def __init__(self, workers: int = 8) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="promptrail-wb")
        self._pending: defaultdict[str, set[Future[None]]] = defaultdict(set)
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def submit(self, project: str, what: str, store: Callable[[], None]) -> Future[None]:
        """Run ``store`` in the background, retrying; ``what`` names it in log lines."""
        future = self._pool.submit(_with_retries, what, store, self._closing)
        with self._lock:
            self._pending[project].add(future)
        future.add_done_callback(lambda done: self._forget(project, done))
        return future

    def wait(self, project: str, timeout: float = _READ_WAIT) -> None:
        """Return once the project's pending records are stored (or ``timeout`` passed)."""
        with self._lock:
            pending = list(self._pending.get(project, ()))
        if pending:
            wait_futures(pending, timeout=timeout)

    def close(self) -> None:
        """Store every pending record (one last try where the store refuses), stop the workers."""
        self._closing.set()
        self._pool.shutdown(wait=True)

    def _forget(self, project: str, future: Future[None]) -> None:
        with self._lock:
            waiting = self._pending.get(project)
            if waiting is not None:
                waiting.discard(future)
                if not waiting:
                    del self._pending[project]


def _with_retries(what: str, store: Callable[[], None], closing: threading.Event) -> None:
    began = time.monotonic()
    delays = iter(_RETRY_DELAYS)
    for attempt in itertools.count(1):
        try:
            store()
            if attempt > 1:
                logger.info("%s stored (attempt %d)", what, attempt)
            return
        except Exception as exc:
            failure = exc
        delay: float | None
        if isinstance(failure, StoreUnavailable):
            delay = float(failure.headers.get("Retry-After", "1"))
            if closing.is_set() or time.monotonic() - began > _STORE_PATIENCE:
                delay = None
        else:
            delay = next(delays, None)
        if delay is None:
            logger.error("%s not stored after %d attempts: %s", what, attempt, failure)
            return
        if attempt == 1 or not isinstance(failure, StoreUnavailable):
            logger.warning("%s not stored (attempt %d), retrying: %s", what, attempt, failure)
        closing.wait(delay)
