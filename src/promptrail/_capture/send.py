"""The one send path of capture: records encoded, posted, retried, spooled, counted.

:class:`RecordSender` is what the shipper (``shipping.py``) hands records to: it masks and
encodes them (``encode.py``, msgspec), has them posted compressed (zstd or gzip) to its
endpoint (``post.py``, ``endpoints.py``: ``/v1/requests/batch``, or for scores
``/v1/scores/batch``) with ids derived from span ids so a resent batch is stored once, keeps
what the collector cannot take within a byte budget and, while it is down, hands it to the
disk spool (``spool.py``, which replays it), and counts every record's fate (``stats.py``).
``promptrail.otel.PromptrailSpanExporter`` is this class behind the OpenTelemetry
``SpanExporter`` interface, for applications that bring their own SDK.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

from .._disk import say_unusable
from .._settings import DEFAULT_BASE_URL as DEFAULT_BASE_URL  # otel.py re-exports it
from .._settings import api_key_or_environment, base_url_or_environment
from .encode import Mask as Mask  # pipelines.py, _runtime.py and otel.py take it from here
from .encode import RecordEncoder
from .endpoints import RECORDS, Endpoint
from .post import BatchPoster
from .reachability import unsent_line
from .sampling_and_fork import restart_after_fork
from .spool import (
    DEFAULT_SPOOL_MAX_AGE,
    DEFAULT_SPOOL_MAX_BYTES,
    Settle,
    Spool,
    SpoolBacklog,
)
from .stats import CaptureStats

logger = logging.getLogger("promptrail")

# Records per post, and their JSON's size: large enough that a deep backlog goes out in few
# posts (each post waits for the GIL several times while the application is busy), within the
# collector's limits (PROMPTRAIL_MAX_BATCH_RECORDS, PROMPTRAIL_MAX_BODY_BYTES).
_BATCH = 4096
_BATCH_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
# At shutdown, a collector the last post found unreachable gets one attempt this long, not the
# whole bound: waiting seconds for an answer that will not come only delays the exit.
QUICK_SHUTDOWN_SECONDS = 1.0


class RecordSender:
    """Encode records, post them to the collector with retries, and keep what it cannot take
    (in memory, bounded, or in the disk spool) until it can.

    ``endpoint`` says what it sends where (records by default; scores take the same sender
    to ``/v1/scores/batch``).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 10.0,
        export_deadline: float = 10.0,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        mask: Mask | None = None,
        stats: CaptureStats | None = None,
        transport: httpx.BaseTransport | None = None,
        cache_dir: Path | None = None,
        spool_max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
        spool_max_age: float = DEFAULT_SPOOL_MAX_AGE,
        endpoint: Endpoint = RECORDS,
        environment: str | None = None,
    ) -> None:
        """Ship to ``base_url`` (``PROMPTRAIL_BASE_URL``) with ``api_key`` (``PROMPTRAIL_API_KEY``).

        ``export_deadline`` bounds the time one export (retries included) may take, so one
        post waits at most ``min(timeout, export_deadline)``; ``max_pending_bytes`` bounds the
        records (their JSON) kept while the collector is unreachable. Without an API key
        nothing can be sent: one warning says so, and every record is counted as dropped
        (``no_api_key``) instead of being retried. ``cache_dir``: keep what the collector
        could not take in a disk spool there (``spool.py``), bounded by
        ``spool_max_bytes`` and ``spool_max_age`` seconds, and replay it once it is back; None
        (the default for this adapter; ``promptrail.init`` passes its cache directory) keeps
        records in memory only. ``environment``: the environment each record is logged in
        (``promptrail.init``'s; a record naming its own keeps it); None leaves records as they
        are.
        """
        self._endpoint = endpoint
        self._noun = endpoint.kind  # what the log lines call the items
        self._api_key = api_key_or_environment(api_key)
        if not self._api_key and endpoint.warn_without_key:
            logger.warning(
                "promptrail: no API key: set PROMPTRAIL_API_KEY (or pass api_key=); captured "
                "records are dropped and counted in promptrail.stats() as 'no_api_key'"
            )
        self._base_url = base_url_or_environment(base_url).rstrip("/")
        self._deadline = export_deadline
        # One post never outlasts the export it belongs to.
        self._timeout = max(0.001, min(timeout, export_deadline))
        self._max_pending_bytes = max_pending_bytes
        self.stats = stats or CaptureStats()
        self._encoder = RecordEncoder(mask, environment, self.stats, endpoint.typical_bytes)
        self._pending: deque[bytes] = deque()
        self.pending_bytes = 0
        self._warned_full = False
        # Records move between pending, exported and dropped under the counters' lock, so a
        # snapshot of the counters never sees a record in two places or in none.
        self._lock = self.stats.lock
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._closed = False
        self._spilled_at_shutdown = 0  # what the exit line says was kept on disk
        self._disk = self._open_backlog(cache_dir, spool_max_bytes, spool_max_age)
        self._poster = BatchPoster(
            self._base_url,
            self._api_key,
            endpoint,
            timeout=self._timeout,
            transport=transport,
            stats=self.stats,
            stopping=self._stopping,
            spool_place=self._spool_place,
        )
        restart_after_fork(self)

    def _open_backlog(
        self, cache_dir: Path | None, max_bytes: int, max_age: float
    ) -> SpoolBacklog | None:
        if cache_dir is None or not self._api_key:
            return None
        try:
            spool = Spool.open(
                cache_dir,
                self._base_url,
                self._api_key,
                self._noun,
                max_bytes=max_bytes,
                max_age=max_age,
            )
        except OSError as exc:
            # One line for records and scores: they share the directory.
            say_unusable(
                cache_dir,
                exc,
                "records",
                "they wait in memory only (set PROMPTRAIL_CACHE_DIR, or PROMPTRAIL_DISK_CACHE=0 "
                "to say so)",
            )
            return None
        return SpoolBacklog(spool, self.stats, self._post_replayed, self._stopping, self._noun)

    @property
    def _spool_place(self) -> str | None:
        return self._disk.place if self._disk is not None else None

    @property
    def endpoint(self) -> Endpoint:
        """What this sender sends, and where."""
        return self._endpoint

    @property
    def spool(self) -> Spool | None:
        """The disk spool of what the collector could not take (None: memory only)."""
        return self._disk.spool if self._disk is not None else None

    def _after_fork(self) -> None:
        # The parent's connections and pending records are the parent's: start clean.
        self.stats.lock = self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._pending = deque()
        self.pending_bytes = 0
        self._poster.restart(self._spool_place)

    @property
    def pending(self) -> int:
        """Records waiting for the collector."""
        return len(self._pending)

    @property
    def unreachable(self) -> bool:
        """Whether the last post found the collector unreachable or failing."""
        return self._poster.reach.down

    def ship(self, records: list[dict[str, Any]], *, send: bool = True) -> bool:
        """Mask and encode ``records`` (counted as in flight) and send them with what is pending.

        False when the collector did not take everything within the export deadline (what
        is left waits, bounded, for the next export, flush or shutdown). ``send=False`` only
        adds them to the pending records (shutdown sends everything in one last attempt).
        """
        if not self._api_key:
            with self._lock:
                self.stats.add("in_flight", -len(records))
                self.stats.drop("no_api_key", len(records))
            return True
        self._enqueue(self.encode(records))
        return self._send(self._deadline) if send else not self._pending

    def encode(self, records: list[dict[str, Any]]) -> list[bytes]:
        """Mask each record and encode it as JSON; a record the mask fails on is dropped.

        Each record gets the sender's environment first (the mask sees it).
        """
        return self._encoder.encode(records)

    @property
    def mean_record_bytes(self) -> int:
        """The mean size of the items encoded so far (a typical item's until there are some)."""
        return self._encoder.mean_record_bytes

    def has_room(self) -> bool:
        """Whether the records waiting for the collector are within their byte budget."""
        return self.pending_bytes < self._max_pending_bytes

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send every pending record (and the spool's), retrying until ``timeout_millis``."""
        sent = self._send(timeout_millis / 1000, replay_all=True)
        self.report_recovery()
        return sent

    def report_recovery(self) -> None:
        """After an outage, log once that the collector is back and how many records went.

        Called when a round of sending ends (an export, a flush, the shipper's drain), so the
        count covers the backlog, not only the first post that got through.
        """
        if self.replay_backlog and not self._poster.reach.down:
            return  # the line waits until the spool's backlog went too (or the collector did)
        self._poster.reach.settled(len(self._pending))

    def stop_retrying(self) -> None:
        """Cut every retry wait short from now on (shutdown is coming)."""
        self._stopping.set()

    def final_send(self, budget: float) -> bool:
        """One last attempt (no retry waits) to send what is pending, within ``budget`` s.

        When the last post found the collector unreachable, the attempt gets at most
        ``QUICK_SHUTDOWN_SECONDS``: an exit is not held up waiting for a collector known down.
        """
        self._stopping.set()
        budget = min(budget, self._deadline)
        if self._poster.reach.down:
            budget = min(budget, QUICK_SHUTDOWN_SECONDS)
        if budget <= 0:
            return not self._pending
        sent = self._send(budget, request_timeout=budget)
        self.report_recovery()
        return sent

    def close(self, *, waited: float, unsent: int = 0) -> None:
        """Count what is still pending (and ``unsent`` records the caller held) as dropped.

        One warning says how many, where they went and why (the collector's URL and what the
        last post found); ``waited`` is how long the shutdown tried. Closing twice is harmless.
        """
        if self._disk is not None and not self._closed:
            self._stopping.set()
            self._spill()
        kept = self._spilled_at_shutdown
        with self._lock:
            if self._closed:
                return
            self._closed = True
            lost = len(self._pending) + unsent
            self._pending.clear()
            self.pending_bytes = 0
            if lost:
                self.stats.drop("shutdown_unsent", lost)
        why = self._poster.reach.why_unsent(waited)
        if kept:
            place = f"kept on disk at {self._spool_place}"
            logger.warning(unsent_line(kept, place, why, self._noun))
        if lost:
            logger.warning(unsent_line(lost, "dropped", why, self._noun))
        # A post still stuck on a silent collector holds the lock and its connection: leave
        # that client to the post (the process is ending) rather than close it under it.
        if self._send_lock.acquire(blocking=False):
            try:
                self._poster.client.close()
            finally:
                self._send_lock.release()

    # -- internals -------------------------------------------------------------------------

    def _enqueue(self, encoded: list[bytes]) -> None:
        """Move records from in flight to pending; those over the byte budget are dropped.

        The newest go, never the oldest: those may be in a post right now.
        """
        with self._lock:
            self.stats.add("in_flight", -len(encoded))
            room = self._max_pending_bytes - self.pending_bytes
            kept = len(encoded)
            size = sum(map(len, encoded))
            while size > room:
                kept -= 1
                size -= len(encoded[kept])
            self._pending.extend(encoded[:kept])
            self.pending_bytes += size
            overflow = len(encoded) - kept
            if overflow:
                self.stats.drop("pending_full", overflow)
        if overflow and not self._warned_full:
            self._warned_full = True
            logger.warning(
                "promptrail: records dropped: the collector is not taking them and they are "
                "over the capture budget of %d MiB (raise it with init(max_queue_bytes=...) or "
                "PROMPTRAIL_MAX_QUEUE_BYTES; counted in promptrail.stats())",
                self._max_pending_bytes >> 20,
            )

    def _send(
        self, budget: float, request_timeout: float | None = None, *, replay_all: bool = False
    ) -> bool:
        deadline = time.monotonic() + max(0.0, budget)
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            with self._send_lock:
                sent = True
                while True:
                    with self._lock:
                        batch = _next_batch(self._pending)
                    if not batch:
                        break
                    if not self._poster.post(
                        batch, deadline, request_timeout, self._settle, patient=self._disk is None
                    ):
                        if self._disk is None or not self._poster.reach.down:
                            return False
                        # An outage: to disk now (a kill must not lose them); the replay retries.
                        self._spill()
                        sent = False
                        break
                if self._disk is not None:
                    replayed = self._replay(deadline, request_timeout, everything=replay_all)
                    if replay_all:
                        # A flush is done when nothing waits, in memory or on disk (what it
                        # spilled above may have gone out in the replay after all).
                        sent = replayed
                return sent
        finally:
            detach(token)

    # -- the disk spool (spool.py spills and replays) ------------------------------------------

    @property
    def replay_backlog(self) -> bool:
        """Whether spool files are known to wait for this process to replay them."""
        return self._disk is not None and self._disk.waiting

    def replay(self, budget: float | None = None) -> None:
        """Send spooled records, at a bounded rate (a shipper's round), within ``budget`` s
        (the export deadline by default)."""
        if self._disk is None or not self._disk.due():
            return
        budget = self._deadline if budget is None else budget
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            # A round never waits behind a post already under way (a flush's).
            if self._send_lock.acquire(blocking=False):
                try:
                    self._replay(time.monotonic() + budget, None, everything=False)
                finally:
                    self._send_lock.release()
        finally:
            detach(token)

    def _replay(self, deadline: float, request_timeout: float | None, *, everything: bool) -> bool:
        """The spool's replay (under the send lock); True when no file is left."""
        disk = self._disk
        if disk is None:
            return True
        return disk.replay(deadline, request_timeout, everything=everything)

    def _spill(self) -> int:
        """Move every pending record to the spool; how many went (0 if it could not write)."""
        disk = self._disk
        with self._lock:
            records = list(self._pending)
        if disk is None or not records:
            return 0
        losses = disk.spill(records)
        if losses is None:
            self._disk = None  # the spool is unusable: memory only from now on
            return 0
        with self._lock:
            pending = self._pending
            # Only the sender (this thread, under the send lock, or close) takes records off,
            # and new ones are appended at the end: the first len(records) are those written.
            for _ in range(min(len(records), len(pending))):
                self.pending_bytes -= len(pending.popleft())
            self.stats.add("spooled", len(records))
            disk.count_losses(losses)
            if self._stopping.is_set():
                self._spilled_at_shutdown += len(records)
        return len(records)

    def _post_replayed(
        self,
        batch: list[bytes],
        deadline: float,
        request_timeout: float | None,
        settle: Settle,
        patient: bool,
    ) -> bool:
        """The spool's post of a file's records (the recovery line counts them apart)."""
        return self._poster.post(
            batch, deadline, request_timeout, settle, patient=patient, replayed=True
        )

    def _settle(self, count: int, exported: int, reason: str) -> None:
        """Take the first ``count`` pending records off: ``exported`` stored, the rest dropped."""
        with self._lock:
            if self._closed:
                return  # a post that outlasted shutdown: its records are counted as dropped
            pending = self._pending
            for _ in range(min(count, len(pending))):
                self.pending_bytes -= len(pending.popleft())
            self.stats.add("exported", exported)
            if count > exported:
                self.stats.drop(reason, count - exported)


def _next_batch(pending: deque[bytes]) -> list[bytes]:
    """The oldest pending records, within a post's count and size (at least one)."""
    batch: list[bytes] = []
    size = 0
    for record in itertools.islice(pending, _BATCH):
        size += len(record)
        if size > _BATCH_BYTES and batch:
            break
        batch.append(record)
    return batch
