"""The capture pipeline: init, the tracer, the queue, flush and shutdown.

Capture runs on OpenTelemetry. By default promptrail has its own tracer (it never replaces the
application's global provider) whose spans are the light :class:`~._spans.CaptureSpan` s,
shipped by a :class:`~._shipping.SpanShipper` — an SDK span costs as much as a capture's whole
budget (docs/architecture.md, "Capture path"). ``init(tracer_provider=...)`` joins the
application's SDK provider instead: promptrail's processor is then the SDK's
BatchSpanProcessor (bounded queue, background export), extended only to count what it has to
drop and to skip spans that would not become records.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from ._disk import remember_cache_dir, resolve_cache_dir
from ._genai import is_recordable
from ._sampling_and_fork import Sampler
from ._score_shipping import ScoreExporter, ScoreShipper
from ._send import DEFAULT_MAX_PENDING_BYTES, QUICK_SHUTDOWN_SECONDS, Mask, RecordSender
from ._settings import api_key_or_environment, byte_setting, current
from ._shipping import SpanShipper
from ._spans import CaptureTracer, last_record
from ._spool import DEFAULT_SPOOL_MAX_AGE, spool_bound
from ._stats import CaptureStats
from ._version import __version__
from .otel import PromptrailSpanExporter

logger = logging.getLogger("promptrail")

_SHUTDOWN_TIMEOUT = 3.0


class _QueueFullFilter(logging.Filter):
    """Silence the SDK's per-span "Queue full" warning: drops are counted in ``stats()``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Queue full")


logging.getLogger("opentelemetry.sdk._shared_internal").addFilter(_QueueFullFilter())


class _CountingQueue(deque[Any]):
    """The processor's queue, counting each span a full queue pushes out.

    BatchSpanProcessor drops silently (its bounded deque evicts the oldest span); appending
    and popping under one lock makes the count exact while its worker drains concurrently.
    """

    def __init__(self, maxlen: int, stats: CaptureStats) -> None:
        super().__init__([], maxlen)
        self._lock = threading.Lock()
        self._stats = stats
        self._warned = False

    def appendleft(self, item: Any, /) -> None:
        with self._lock:
            if self.maxlen is not None and len(self) >= self.maxlen:
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "promptrail: capture queue full (%d); dropping the oldest records "
                        "(counted in promptrail.stats())",
                        self.maxlen,
                    )
                self._stats.drop("queue_full")
            # Called per span: the base method directly, without building a super() proxy.
            deque.appendleft(self, item)

    def pop(self, *index: int) -> Any:  # deque.pop() takes no index; the protocol's may
        with self._lock:
            return deque.pop(self, *index)


class _CountingProcessor(BatchSpanProcessor):
    """BatchSpanProcessor that counts what it captures and what the full queue drops."""

    def __init__(
        self, exporter: PromptrailSpanExporter, sample_rate: float, **options: Any
    ) -> None:
        super().__init__(exporter, **options)
        self._stats = exporter.stats
        self._sampler = Sampler(sample_rate)
        inner = self._batch_processor
        inner._queue = _CountingQueue(inner._max_queue_size, self._stats)

    def on_end(self, span: ReadableSpan) -> None:
        if not is_recordable(span.attributes or {}):
            return
        context = span.get_span_context()
        if context is not None and not self._sampler.keeps(context.trace_id):
            # Sampling by trace id keeps or drops whole traces, the same way in every process.
            self._stats.add("sampled_out")
            return
        self._stats.add("captured")
        if context is not None:  # the thread ending the span: promptrail.last_request_id()
            last_record.set((context.trace_id, context.span_id))
        super().on_end(span)


@dataclass
class _Pipeline:
    tracer: Tracer
    exporter: RecordSender | None = None
    shipper: SpanShipper | None = None  # promptrail's own spans
    processor: _CountingProcessor | None = None  # joined to the application's provider
    scores: ScoreShipper | None = None  # promptrail.score(), to /v1/scores/batch
    api_key: str = ""  # what feedback tokens are signed with

    @property
    def queued(self) -> int:
        if self.shipper is not None:
            return self.shipper.queued
        return len(self.processor._batch_processor._queue) if self.processor else 0


_lock = threading.RLock()
_pipeline: _Pipeline | None = None
_stats = CaptureStats()
_score_stats = CaptureStats()  # scores are counted apart: stats()["scores"]
_atexit_registered = False


def init(
    api_key: str | None = None,
    base_url: str | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    enabled: bool = True,
    sample_rate: float = 1.0,
    mask: Mask | None = None,
    max_queue_bytes: int | None = None,
    max_queue_size: int = 10_000,
    flush_interval: float = 1.0,
    export_timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    spool_max_bytes: int | None = None,
    spool_max_age: float = DEFAULT_SPOOL_MAX_AGE,
) -> None:
    """Start capturing: records go to ``base_url`` (``PROMPTRAIL_BASE_URL``) with ``api_key``.

    ``tracer_provider``: join that SDK provider (promptrail's spans then reach its other
    processors too) instead of using promptrail's own light spans. ``sample_rate``: the
    share of traces kept. ``mask``: applied to every record before it leaves the process.
    ``enabled=False`` captures nothing. ``max_queue_bytes``: the memory records may take
    while they wait to be shipped (``PROMPTRAIL_MAX_QUEUE_BYTES``, default 64 MiB); past it,
    new records are dropped and counted. ``max_queue_size``: with ``tracer_provider``, the
    length of its BatchSpanProcessor's queue. ``transport``: an httpx transport for shipping
    (proxies, tests, benchmarks). ``cache_dir``: where records the collector could not take
    are kept (and templates' last good copies; ``PROMPTRAIL_CACHE_DIR``, default the user's
    cache directory + ``/promptrail``; ``PROMPTRAIL_DISK_CACHE=0``: memory only), at most
    ``spool_max_bytes`` (``PROMPTRAIL_SPOOL_MAX_BYTES``, default 256 MiB) for at most
    ``spool_max_age`` seconds (default 7 days); docs/sdk.md, "Outages". Calling ``init``
    again replaces the previous configuration (flushing it first).

    >>> import promptrail
    >>> promptrail.init(api_key="pr-...", base_url="http://127.0.0.1:8000")
    """
    global _pipeline, _atexit_registered
    with _lock:
        if _pipeline is not None:
            _shutdown_pipeline(_pipeline, _SHUTDOWN_TIMEOUT)
        if not enabled:
            _pipeline = _Pipeline(trace.NoOpTracer())
            return
        budget = _queue_budget(max_queue_bytes)
        remember_cache_dir(cache_dir)
        disk: dict[str, Any] = {
            "cache_dir": resolve_cache_dir(cache_dir),
            "spool_max_bytes": spool_bound(spool_max_bytes),
            "spool_max_age": spool_max_age,
        }
        scores = ScoreShipper(
            ScoreExporter(
                api_key,
                base_url,
                export_deadline=export_timeout,
                max_pending_bytes=budget,
                stats=_score_stats,
                transport=transport,
                **disk,  # scores ride the same spool, in a directory of their own
            ),
            _score_stats,
            max_bytes=budget,
            flush_interval=flush_interval,
        )
        key = api_key_or_environment(api_key)
        options: dict[str, Any] = {
            "export_deadline": export_timeout,
            "max_pending_bytes": budget,
            "mask": mask,
            "stats": _stats,
            "transport": transport,
            **disk,
        }
        if tracer_provider is None:
            # promptrail's own spans hand records to the sender directly (no OpenTelemetry SDK
            # interface on the default path).
            exporter = RecordSender(api_key, base_url, **options)
            shipper = SpanShipper(
                exporter,
                _stats,
                sample_rate=sample_rate,
                max_bytes=budget,
                flush_interval=flush_interval,
            )
            _pipeline = _Pipeline(
                CaptureTracer(shipper.on_end), exporter, shipper=shipper, scores=scores, api_key=key
            )
        else:
            # The application's SDK provider needs the sender behind its SpanExporter interface.
            exporter = span_exporter = PromptrailSpanExporter(api_key, base_url, **options)
            processor = _CountingProcessor(
                span_exporter,
                sample_rate,
                max_queue_size=max_queue_size,
                schedule_delay_millis=flush_interval * 1000,
                max_export_batch_size=min(512, max_queue_size),
            )
            tracer_provider.add_span_processor(processor)
            tracer = tracer_provider.get_tracer("promptrail", __version__)
            _pipeline = _Pipeline(tracer, exporter, processor=processor, scores=scores, api_key=key)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _queue_budget(max_queue_bytes: int | None) -> int:
    return byte_setting(
        max_queue_bytes, "PROMPTRAIL_MAX_QUEUE_BYTES", DEFAULT_MAX_PENDING_BYTES, "max_queue_bytes"
    )


def _ensure() -> _Pipeline:
    with _lock:
        if _pipeline is None:
            # First capture without init(): configure from the environment.
            init(enabled=current().enabled)
        assert _pipeline is not None
        return _pipeline


def tracer() -> Tracer:
    """Return the tracer capture uses (initialising from the environment if needed)."""
    # Called for every captured span: once initialised, skip the lock.
    pipeline = _pipeline
    return pipeline.tracer if pipeline is not None else _ensure().tracer


def score_shipper() -> ScoreShipper | None:
    """The queue ``promptrail.score()`` appends to (None when capture is disabled)."""
    pipeline = _pipeline
    return (pipeline if pipeline is not None else _ensure()).scores


def score_dropped(reason: str) -> None:
    """Count a score that never reached the queue (``invalid``: a bad call) as dropped."""
    with _score_stats.lock:
        _score_stats.add("captured")
        _score_stats.drop(reason)


def configured_api_key() -> str:
    """The API key capture sends with: ``init(api_key=...)``, else ``PROMPTRAIL_API_KEY``."""
    pipeline = _pipeline
    if pipeline is not None and pipeline.api_key:
        return pipeline.api_key
    return current().api_key.strip()


def flush(timeout: float = 5.0) -> bool:
    """Send every captured record and score now; False if ``timeout`` (seconds) ran out first."""
    pipeline = _pipeline
    if pipeline is None or pipeline.exporter is None:
        return True
    shipper, processor, exporter = pipeline.shipper, pipeline.processor, pipeline.exporter
    scores = pipeline.scores
    outcome: list[bool] = []

    def run() -> None:
        deadline = time.monotonic() + timeout
        if shipper is not None:
            sent = shipper.flush(timeout)
        else:
            if processor is not None:
                processor.force_flush(int(timeout * 1000))
            sent = exporter.force_flush(int(timeout * 1000))
        if scores is not None and not scores.idle:
            sent = scores.flush(max(0.0, deadline - time.monotonic())) and sent
        outcome.append(sent)

    worker = threading.Thread(target=run, name="promptrail-flush", daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(outcome and outcome[0])


def shutdown(timeout: float = _SHUTDOWN_TIMEOUT) -> None:
    """Flush (within ``timeout``) and stop capturing."""
    global _pipeline
    with _lock:
        if _pipeline is not None:
            _shutdown_pipeline(_pipeline, timeout)
            _pipeline = None
        remember_cache_dir(None)  # clients made from now on use the environment's again


def _shutdown_pipeline(pipeline: _Pipeline, timeout: float) -> None:
    scores = pipeline.scores
    if scores is None or scores.idle:
        if scores is not None:
            scores.shutdown(0.0)  # nothing to send: closes at once
        _shutdown_records(pipeline, timeout)
        return
    # Scores go out beside the records, not after them: the shutdown keeps its one bound.
    closer = threading.Thread(
        target=scores.shutdown, args=(timeout,), name="promptrail-scores-exit", daemon=True
    )
    closer.start()
    _shutdown_records(pipeline, timeout)
    closer.join(timeout + 0.5)


def _shutdown_records(pipeline: _Pipeline, timeout: float) -> None:
    if pipeline.shipper is not None:
        pipeline.shipper.shutdown(timeout)
        return
    if pipeline.processor is None:
        return
    processor, exporter = pipeline.processor, pipeline.exporter
    if exporter is not None:
        # An export may be waiting to retry against a collector that is down: wake it, so
        # the processor's worker stops and the final send happens within the timeout.
        exporter.stop_retrying()
        if exporter.unreachable:
            timeout = min(timeout, QUICK_SHUTDOWN_SECONDS)
    # BatchSpanProcessor.shutdown() waits up to 30 s; its inner processor takes a bound.
    worker = threading.Thread(
        target=processor._batch_processor.shutdown,
        kwargs={"timeout_millis": int(timeout * 1000)},
        daemon=True,
    )
    worker.start()
    worker.join(timeout + 0.5)
    if exporter is not None:
        # The processor closes its exporter, unless an export outlasted the timeout: then
        # what it still holds is counted and reported here (a second close does nothing).
        exporter.close(waited=timeout)


def _at_exit() -> None:
    # Bounded: an application must be able to exit even when the collector is down.
    shutdown(_SHUTDOWN_TIMEOUT)


def stats() -> dict[str, Any]:
    """Return capture counters: captured, exported, pending, spooled, dropped (by reason).

    ``captured == exported + pending + spooled + dropped_total`` in every snapshot; ``queued``
    is the part of ``pending`` not yet taken by the shipper. ``spooled``: records written to
    the disk spool for later; ``replayed``: spooled records (this process's or another's)
    this process delivered; ``spool_dropped``: records the spool gave up on, by reason
    (``spool_full``, ``spool_expired``, ``spool_corrupt``); ``spool``: its directory (None:
    memory only).
    """
    pipeline = _pipeline
    with _stats.lock:
        queued = pipeline.queued if pipeline else 0
        waiting = pipeline.exporter.pending if pipeline and pipeline.exporter else 0
        snapshot = {"captured": 0, "exported": 0, "spooled": 0, "replayed": 0, **_stats.snapshot()}
    in_flight = snapshot.pop("in_flight", 0)
    snapshot["pending"] = queued + in_flight + waiting
    snapshot["queued"] = queued
    if pipeline is not None and pipeline.shipper is not None:
        # The shipper counts a span as captured once it leaves its queue.
        snapshot["captured"] = snapshot.get("captured", 0) + queued
    spool = pipeline.exporter.spool if pipeline and pipeline.exporter else None
    snapshot["spool"] = str(spool.directory) if spool is not None else None
    snapshot["scores"] = _score_snapshot(pipeline.scores if pipeline else None)
    return snapshot


def _score_snapshot(scores: ScoreShipper | None) -> dict[str, Any]:
    """The scores' own counters, with the same invariant as the records'."""
    with _score_stats.lock:
        queued = scores.queued if scores else 0
        waiting = scores.exporter.pending if scores else 0
        snapshot = {
            "captured": 0,
            "exported": 0,
            "spooled": 0,
            "replayed": 0,
            **_score_stats.snapshot(),
        }
    snapshot["pending"] = queued + snapshot.pop("in_flight", 0) + waiting
    snapshot["queued"] = queued
    snapshot["captured"] += queued
    return snapshot


def reset_stats() -> None:
    """Zero the counters (tests, benchmarks)."""
    _stats.reset()
    _score_stats.reset()
