"""The one send path of capture: records encoded, posted, retried, spooled, counted.

:class:`RecordSender` is what the shipper (``_shipping.py``) hands records to: it masks and
encodes them (msgspec), posts them gzip-compressed to ``/v1/requests/batch`` (or, for scores,
``/v1/scores/batch``) with ids derived from span ids so a resent batch is stored once,
retries them by the one retry rule (``_retry.py``), keeps what the collector cannot take
within a byte budget and, while it is down, in the disk spool (``_spool.py``), and counts
every record's fate (``_stats.py``). ``promptrail.otel.PromptrailSpanExporter`` is this class
behind the OpenTelemetry ``SpanExporter`` interface, for applications that bring their own SDK.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

from ._disk import say_unusable
from ._reachability import Reachability, describe_error, describe_status, seconds, unsent_line
from ._retry import RetryPolicy, retry_after
from ._sampling_and_fork import restart_after_fork
from ._settings import DEFAULT_BASE_URL as DEFAULT_BASE_URL  # otel.py re-exports it
from ._settings import api_key_or_environment, base_url_or_environment
from ._spool import (
    DEFAULT_SPOOL_MAX_AGE,
    DEFAULT_SPOOL_MAX_BYTES,
    Spool,
    SpoolFile,
    SpoolLoss,
)
from ._stats import CaptureStats

logger = logging.getLogger("promptrail")

Mask = Callable[[dict[str, Any]], dict[str, Any]]

# A 500 is the collector's own failure (bad input is a 4xx): worth another try.
_RETRYABLE = {429, 500, 502, 503, 504}
# Backoff from 1 s up to 30 s, and a Retry-After honoured up to 30 s, within the export's
# deadline (a retry that would end past it is left to the next export).
_RETRY = RetryPolicy(base=1.0, ceiling=30.0, retry_after_max=30.0)
# Records per post, and their JSON's size: large enough that a deep backlog goes out in few
# posts (each post waits for the GIL several times while the application is busy), within the
# collector's limits (PROMPTRAIL_MAX_BATCH_RECORDS, PROMPTRAIL_MAX_BODY_BYTES).
_BATCH = 4096
_BATCH_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
# One compiled encoder call per record (msgspec, a fraction of orjson's per-call cost:
# docs/benchmarks.md): the record's size is then known exactly and a waiting record keeps only
# its bytes, not its Python objects.
_encode_record = msgspec.json.Encoder(enc_hook=str).encode
_TYPICAL_RECORD_BYTES = 600
# At shutdown, a collector the last post found unreachable gets one attempt this long, not the
# whole bound: waiting seconds for an answer that will not come only delays the exit.
QUICK_SHUTDOWN_SECONDS = 1.0
# Replay of the disk spool goes alongside live records at most this fast (records per second),
# so a backlog of hours does not crowd out the present or flood a collector just back; a flush
# replays as fast as the collector takes it.
REPLAY_RECORDS_PER_SECOND = 20_000
# How often a process looks for files other processes left (it always looks at start and after
# spilling its own).
_RESCAN_SECONDS = 30.0

# What one post of a batch came to: (records posted, records stored, reason for the others).
Settle = Callable[[int, int, str], None]


class RecordSender:
    """Encode records, post them to the collector with retries, and keep what it cannot take
    (in memory, bounded, or in the disk spool) until it can."""

    # Where the JSON items go and the body's key holding them; the SDK's score shipper
    # (promptrail._scores) reuses this exporter's buffering, retries and counting for
    # /v1/scores/batch by changing these.
    _path = "/v1/requests/batch"
    _body_key = b"records"
    _noun = "records"  # what the log lines call them
    # Whether a missing API key is worth its own warning (the score shipper leaves it to
    # the record exporter made next to it: one warning, not two).
    _warn_without_key = True

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
    ) -> None:
        """Ship to ``base_url`` (``PROMPTRAIL_BASE_URL``) with ``api_key`` (``PROMPTRAIL_API_KEY``).

        ``export_deadline`` bounds the time one export (retries included) may take, so one
        post waits at most ``min(timeout, export_deadline)``; ``max_pending_bytes`` bounds the
        records (their JSON) kept while the collector is unreachable. Without an API key
        nothing can be sent: one warning says so, and every record is counted as dropped
        (``no_api_key``) instead of being retried. ``cache_dir``: keep what the collector
        could not take in a disk spool there (``promptrail._spool``), bounded by
        ``spool_max_bytes`` and ``spool_max_age`` seconds, and replay it once it is back; None
        (the default for this adapter; ``promptrail.init`` passes its cache directory) keeps
        records in memory only.
        """
        self._api_key = api_key_or_environment(api_key)
        if not self._api_key and self._warn_without_key:
            logger.warning(
                "promptrail: no API key: set PROMPTRAIL_API_KEY (or pass api_key=); captured "
                "records are dropped and counted in promptrail.stats() as 'no_api_key'"
            )
        self._base_url = base_url_or_environment(base_url).rstrip("/")
        self._deadline = export_deadline
        # One post never outlasts the export it belongs to.
        self._timeout = max(0.001, min(timeout, export_deadline))
        self._max_pending_bytes = max_pending_bytes
        self._mask = mask
        self.stats = stats or CaptureStats()
        self._transport = transport
        self._pending: deque[bytes] = deque()
        self.pending_bytes = 0
        self._warned_full = False
        self._encoded_records = self._encoded_bytes = 0
        # Records move between pending, exported and dropped under the counters' lock, so a
        # snapshot of the counters never sees a record in two places or in none.
        self._lock = self.stats.lock
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._closed = False
        self._spilled_at_shutdown = 0  # what the exit line says was kept on disk
        self._warned_spool_bounds = False
        self._spool = self._open_spool(cache_dir, spool_max_bytes, spool_max_age)
        # Files may be waiting from an earlier run: look at once. Then after each spill, and
        # every _RESCAN_SECONDS for files other processes left.
        self._spool_waiting = self._spool is not None
        self._spool_scanned = time.monotonic()
        self._replay_not_before = 0.0
        self._reach = Reachability(self._base_url, self._noun, self._spool_place)
        self._client = self._new_client()
        restart_after_fork(self)

    def _open_spool(self, cache_dir: Path | None, max_bytes: int, max_age: float) -> Spool | None:
        if cache_dir is None or not self._api_key:
            return None
        try:
            return Spool.open(
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

    @property
    def _spool_place(self) -> str | None:
        return str(self._spool.directory) if self._spool is not None else None

    @property
    def spool(self) -> Spool | None:
        """The disk spool of what the collector could not take (None: memory only)."""
        return self._spool

    def _new_client(self) -> httpx.Client:
        headers = {"User-Agent": "promptrail-python"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return httpx.Client(
            base_url=self._base_url,
            headers=headers,
            timeout=self._timeout,
            transport=self._transport,
        )

    def _after_fork(self) -> None:
        # The parent's connections and pending records are the parent's: start clean.
        self.stats.lock = self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._pending = deque()
        self.pending_bytes = 0
        self._reach = Reachability(self._base_url, self._noun, self._spool_place)
        self._client = self._new_client()

    @property
    def pending(self) -> int:
        """Records waiting for the collector."""
        return len(self._pending)

    @property
    def unreachable(self) -> bool:
        """Whether the last post found the collector unreachable or failing."""
        return self._reach.down

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
        """Mask each record and encode it as JSON; a record the mask fails on is dropped."""
        mask = self._mask
        if mask is None:
            encoded = [_encode_record(record) for record in records]
        else:
            encoded = []
            for record in records:
                masked = self._masked(record, mask)
                if masked is not None:
                    encoded.append(_encode_record(masked))
        self._encoded_records += len(encoded)
        self._encoded_bytes += sum(map(len, encoded))
        return encoded

    @property
    def mean_record_bytes(self) -> int:
        """The mean size of the records encoded so far (a chat call's until there are some)."""
        if not self._encoded_records:
            return _TYPICAL_RECORD_BYTES
        return self._encoded_bytes // self._encoded_records

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
        if self.replay_backlog and not self._reach.down:
            return  # the line waits until the spool's backlog went too (or the collector did)
        self._reach.settled(len(self._pending))

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
        if self._reach.down:
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
        if self._spool is not None and not self._closed:
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
        why = self._reach.why_unsent(waited)
        if kept:
            place = f"kept on disk at {self._spool_place}"
            logger.warning(unsent_line(kept, place, why, self._noun))
        if lost:
            logger.warning(unsent_line(lost, "dropped", why, self._noun))
        # A post still stuck on a silent collector holds the lock and its connection: leave
        # that client to the post (the process is ending) rather than close it under it.
        if self._send_lock.acquire(blocking=False):
            try:
                self._client.close()
            finally:
                self._send_lock.release()

    # -- internals -------------------------------------------------------------------------

    def _masked(self, record: dict[str, Any], mask: Mask) -> dict[str, Any] | None:
        try:
            return mask(record)
        except Exception:
            # Never ship a record the mask could not clean.
            with self._lock:
                self.stats.add("in_flight", -1)
                self.stats.drop("mask_error")
            logger.exception("promptrail: mask failed; record dropped")
            return None

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
                        batch = self._next_batch()
                    if not batch:
                        break
                    if not self._post_with_retries(
                        batch, deadline, request_timeout, self._settle, patient=self._spool is None
                    ):
                        if self._spool is None or not self._reach.down:
                            return False
                        # An outage: to disk now (a kill must not lose them); the replay retries.
                        self._spill()
                        sent = False
                        break
                if self._spool is not None:
                    replayed = self._replay(deadline, request_timeout, everything=replay_all)
                    if replay_all:
                        # A flush is done when nothing waits, in memory or on disk (what it
                        # spilled above may have gone out in the replay after all).
                        sent = replayed
                return sent
        finally:
            detach(token)

    # -- the disk spool ----------------------------------------------------------------------

    @property
    def replay_backlog(self) -> bool:
        """Whether spool files are known to wait for this process to replay them."""
        return self._spool is not None and self._spool_waiting

    def replay(self, budget: float | None = None) -> None:
        """Send spooled records, at a bounded rate (a shipper's round), within ``budget`` s
        (the export deadline by default)."""
        if self._spool is None or not self._replay_due():
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

    def _replay_due(self) -> bool:
        now = time.monotonic()
        if not self._spool_waiting and now - self._spool_scanned >= _RESCAN_SECONDS:
            self._spool_waiting = True
        return self._spool_waiting and now >= self._replay_not_before

    def _replay(self, deadline: float, request_timeout: float | None, *, everything: bool) -> bool:
        """Send spool files, oldest first, while the collector takes them (under the send lock).

        ``everything`` (a flush): until none is left or the deadline, retrying with backoff;
        else (a shipper's round) one attempt per file, at most ``REPLAY_RECORDS_PER_SECOND``.
        Only the holder of the spool's replay lock sends: other processes' files (orphans of
        a killed one too) included. True when no file is left.
        """
        spool = self._spool
        if spool is None or self._stopping.is_set():
            return spool is None
        if not everything and not self._replay_due():
            return not self._spool_waiting
        with spool.replaying() as mine:
            if not mine:
                # Another process is replaying this spool: look again later.
                self._spool_waiting = False
                self._spool_scanned = time.monotonic()
                return False
            self._spool_scanned = time.monotonic()
            # Files that aged past the bound while nobody could send them go unsent, counted.
            with self._lock:
                self._count_losses(spool.enforce_bounds())
            for spool_file in spool.files():
                if time.monotonic() >= deadline or (
                    not everything and time.monotonic() < self._replay_not_before
                ):
                    return False
                if not self._replay_file(
                    spool, spool_file, deadline, request_timeout, patient=everything
                ):
                    return False
            self._spool_waiting = False
            return True

    def _replay_file(
        self,
        spool: Spool,
        spool_file: SpoolFile,
        deadline: float,
        request_timeout: float | None,
        *,
        patient: bool,
    ) -> bool:
        """Post one file's records; True once the collector settled them (the file is gone)."""
        records, lost = spool.read(spool_file)
        if lost:
            self.stats.spool_drop("spool_corrupt", lost)
            logger.warning(
                "promptrail: %d spooled %s lost: %s is torn or corrupt (the rest of it is sent)",
                lost,
                self._noun,
                spool_file.path,
            )
        if records and not self._post_with_retries(
            records, deadline, request_timeout, self._settle_replayed, patient=patient
        ):
            if lost:
                # Its good blocks are rewritten whole, so the loss is counted and said once.
                spool.rewrite(spool_file, records)
            return False
        spool.remove(spool_file)
        self._replay_not_before = time.monotonic() + len(records) / REPLAY_RECORDS_PER_SECOND
        return True

    def _settle_replayed(self, count: int, exported: int, reason: str) -> None:
        with self._lock:
            self.stats.add("replayed", exported)
            if count > exported:
                self.stats.spool_drop(reason, count - exported)

    def _spill(self) -> int:
        """Move every pending record to the spool; how many went (0 if it could not write)."""
        spool = self._spool
        with self._lock:
            records = list(self._pending)
        if spool is None or not records:
            return 0
        try:
            losses = spool.write(records)
        except OSError as exc:
            self._spool = None
            logger.warning(
                "promptrail: cannot write records to %s (%s); they wait in memory only",
                spool.directory,
                exc.strerror or exc,
            )
            return 0
        with self._lock:
            pending = self._pending
            # Only the sender (this thread, under the send lock, or close) takes records off,
            # and new ones are appended at the end: the first len(records) are those written.
            for _ in range(min(len(records), len(pending))):
                self.pending_bytes -= len(pending.popleft())
            self.stats.add("spooled", len(records))
            self._count_losses(losses)
            if self._stopping.is_set():
                self._spilled_at_shutdown += len(records)
        self._spool_waiting = True
        return len(records)

    def _count_losses(self, losses: list[SpoolLoss]) -> None:
        for loss in losses:
            self.stats.spool_drop(loss.reason, loss.records)
        if losses and not self._warned_spool_bounds:
            self._warned_spool_bounds = True
            spool = self._spool
            logger.warning(
                "promptrail: the spool at %s is over its bounds (%d MiB, %s); its oldest %s "
                "are dropped (counted in promptrail.stats(); init(spool_max_bytes=..., "
                "spool_max_age=...) or PROMPTRAIL_SPOOL_MAX_BYTES raise them)",
                self._spool_place,
                spool.max_bytes >> 20 if spool else 0,
                seconds(spool.max_age) if spool else "",
                self._noun,
            )

    def _next_batch(self) -> list[bytes]:
        """The oldest pending records, within a post's count and size (at least one)."""
        batch: list[bytes] = []
        size = 0
        for record in itertools.islice(self._pending, _BATCH):
            size += len(record)
            if size > _BATCH_BYTES and batch:
                break
            batch.append(record)
        return batch

    def _post_with_retries(
        self,
        batch: list[bytes],
        deadline: float,
        request_timeout: float | None,
        settle: Settle,
        *,
        patient: bool = True,
    ) -> bool:
        """Post one batch; True once it is settled (stored, or refused for good).

        Not ``patient``: an outage ends the attempt at once (the records go to, or stay in,
        the disk spool, whose replay is the retry); a 429 is still waited for.
        """
        # The records are JSON already: the body is one join. Level 1: records repeat
        # themselves, so it still shrinks a batch about tenfold for a third of level 5's CPU.
        body = b'{"' + self._body_key + b'":[' + b",".join(batch) + b"]}"
        body = gzip.compress(body, compresslevel=1)
        attempt = 0
        while True:
            wait = self._post(len(batch), body, request_timeout, settle)
            if wait is None:
                return True
            if not patient and self._reach.down:
                self.stats.add("export_retries_deferred")
                return False
            attempt += 1
            backoff = _RETRY.pause(wait if wait > 0 else None, attempt)
            if time.monotonic() + backoff > deadline or self._stopping.is_set():
                self.stats.add("export_retries_deferred")
                return False
            self.stats.add("export_retries")
            self._stopping.wait(backoff)

    def _post(self, count: int, body: bytes, timeout: float | None, settle: Settle) -> float | None:
        """Send once; None when settled, else seconds to wait (0: use backoff)."""
        timeout = self._timeout if timeout is None else timeout
        try:
            response = self._client.post(
                self._path,
                content=body,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            logger.debug("promptrail: collector unreachable: %s", exc)
            self._reach.failed(describe_error(exc, timeout))
            return 0.0
        if response.status_code in _RETRYABLE:
            # A 429 is the collector answering (a project over its limit), not an outage.
            if response.status_code != 429:
                self._reach.failed(describe_status(response))
            return retry_after(response) or 0.0
        if response.status_code == 201:
            data = response.json().get("data", {})
            rejected = data.get("rejected", [])
            exported = count - len(rejected)
            settle(count, exported, "rejected")
            self._reach.answered(exported, replayed=settle != self._settle)
            if rejected:
                logger.warning(
                    "promptrail: collector rejected %d %s: %s",
                    len(rejected),
                    self._noun,
                    rejected[0],
                )
            return None
        reason = {400: "rejected", 401: "unauthorized", 413: "too_large"}.get(
            response.status_code, "http_error"
        )
        settle(count, 0, reason)
        self._reach.answered(0)
        logger.warning(
            "promptrail: collector refused %d %s (%s): %s",
            count,
            self._noun,
            response.status_code,
            response.text[:300],
        )
        return None

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
