"""Write-behind (the run records), with read-your-writes for every read of this collector.

A run answers its caller as soon as the provider's answer is priced; its record is stored
right after, on a small worker pool, instead of the caller waiting for the insert (most of a
run's own cost on the embedded store). Reads of the request log first wait for the project's
records still being stored (and for the log's journal, when its writer keeps one), so
anything a client saw finish is in every list, detail, search, export, analytics and delete
that follows it on this collector. Shutdown drains the pool
before the store closes, so a graceful stop loses nothing.

A write that is :class:`.Refused` (the store stalled, failing, its group commit full) is
tried again at the store's ``retry_after`` for a while; one that raises, a few times quickly.
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

from .outcomes import Refused, WriteOutcome

logger = logging.getLogger("promptrail.runs")

# A read waits at most this long for pending records, then reads what is stored.
_READ_WAIT = 10.0
# Retries of a failed store, so a brief store hiccup does not lose a record.
_RETRY_DELAYS = (0.1, 0.5, 2.0)
# A store that refuses writes for now (stalled, failing, its buffer full) is tried again every
# ``retry_after`` seconds (the Retry-After ingest answers with) for this long before the record
# is given up (docs/deploy.md): runs are refused while ingest is, so only the records of runs
# under way when it stalled wait here.
_STORE_PATIENCE = 600.0


class PendingWrites:
    """Records acknowledged to their writer and still being stored, per project."""

    def __init__(
        self,
        workers: int = 8,
        retry_after: float = 2.0,
        settle: Callable[[], None] | None = None,
    ) -> None:
        """``settle`` waits for the rows the log's writer answered before they were stored
        (its journal: ``RowWriter.settle``); a read waits for it after the records here."""
        self._retry_after = retry_after
        self._settle = settle
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="promptrail-wb")
        self._pending: defaultdict[str, set[Future[None]]] = defaultdict(set)
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def submit(self, project: str, what: str, write: Callable[[], WriteOutcome]) -> Future[None]:
        """Run ``write`` in the background until it stores; ``what`` names it in log lines."""
        future = self._pool.submit(_with_retries, what, write, self._retry_after, self._closing)
        with self._lock:
            self._pending[project].add(future)
        future.add_done_callback(lambda done: self._forget(project, done))
        return future

    def wait(self, project: str, timeout: float = _READ_WAIT) -> None:
        """Return once the project's pending records are stored (or ``timeout`` passed), and
        every record the log's writer answered before (its journal: see ``settle``)."""
        with self._lock:
            pending = list(self._pending.get(project, ()))
        if pending:
            wait_futures(pending, timeout=timeout)
        if self._settle is not None:
            self._settle()

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


def _with_retries(
    what: str, write: Callable[[], WriteOutcome], retry_after: float, closing: threading.Event
) -> None:
    began = time.monotonic()
    delays = iter(_RETRY_DELAYS)
    for attempt in itertools.count(1):
        failure: Exception | Refused
        try:
            outcome = write()
        except Exception as exc:
            failure = exc
        else:
            if not isinstance(outcome, Refused):
                if attempt > 1:
                    logger.info("%s stored (attempt %d)", what, attempt)
                return
            failure = outcome
        delay: float | None
        refused = isinstance(failure, Refused)
        if refused:
            delay = retry_after
            if closing.is_set() or time.monotonic() - began > _STORE_PATIENCE:
                delay = None
        else:
            delay = next(delays, None)
        reason = failure.message if isinstance(failure, Refused) else failure
        if delay is None:
            logger.error("%s not stored after %d attempts: %s", what, attempt, reason)
            return
        if attempt == 1 or not refused:
            logger.warning("%s not stored (attempt %d), retrying: %s", what, attempt, reason)
        closing.wait(delay)
