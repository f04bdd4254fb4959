"""The pipelines ``promptrail.init`` builds, in one place: tracer, shipper, sender, spool.

By default promptrail has its own tracer (it never replaces the application's global
provider) whose spans are the light :class:`~.spans.CaptureSpan` s, shipped by a
:class:`~.shipping.Shipper` — an SDK span costs as much as a capture's whole budget
(src/promptrail/DESIGN.md, "Capture path"). ``init(tracer_provider=...)`` joins the
application's SDK provider instead: promptrail's processor is then the SDK's
BatchSpanProcessor (bounded queue, background export), extended only to count what it has to
drop and to skip spans that would not become records. Either way scores get a pipeline of
their own beside the records' (the same shipper and sender, to the scores endpoint), which
shares the records' disk spool directory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from .._genai import is_recordable
from .._version import __version__
from ..otel import PromptrailSpanExporter
from .endpoints import SCORES
from .sampling_and_fork import Sampler
from .send import QUICK_SHUTDOWN_SECONDS, Mask, RecordSender
from .shipping import Shipper
from .spans import CaptureTracer, last_record
from .stats import CaptureStats

logger = logging.getLogger("promptrail")


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


class CountingProcessor(BatchSpanProcessor):
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


@dataclass(frozen=True)
class PipelineOptions:
    """What ``init`` was given, resolved (environment and defaults applied)."""

    api_key: str | None
    base_url: str | None
    sample_rate: float
    mask: Mask | None
    max_bytes: int  # the memory budget of what waits, records and scores each
    max_queue_size: int  # with tracer_provider: its BatchSpanProcessor's queue
    flush_interval: float
    export_timeout: float
    transport: httpx.BaseTransport | None
    cache_dir: Path | None  # None: memory only
    spool_max_bytes: int
    spool_max_age: float
    # The environment every record is logged in (``init``'s, else PROMPTRAIL_ENVIRONMENT).
    environment: str = "production"


@dataclass
class Pipeline:
    """What capture runs on between ``init`` and ``shutdown``."""

    tracer: Tracer
    exporter: RecordSender | None = None
    shipper: Shipper | None = None  # promptrail's own spans
    processor: CountingProcessor | None = None  # joined to the application's provider
    scores: Shipper | None = None  # promptrail.score(), to /v1/scores/batch
    api_key: str = ""  # what feedback tokens are signed with

    @property
    def queued(self) -> int:
        """Spans waiting for the shipper (or the processor) to take them."""
        if self.shipper is not None:
            return self.shipper.queued
        return len(self.processor._batch_processor._queue) if self.processor else 0

    def flush(self, timeout: float) -> bool:
        """Send every captured record and score now; False if ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        if self.shipper is not None:
            sent = self.shipper.flush(timeout)
        else:
            if self.processor is not None:
                self.processor.force_flush(int(timeout * 1000))
            sent = self.exporter.force_flush(int(timeout * 1000)) if self.exporter else True
        scores = self.scores
        if scores is not None and not scores.idle:
            sent = scores.flush(max(0.0, deadline - time.monotonic())) and sent
        return sent

    def shutdown(self, timeout: float) -> None:
        """Ship what is left within ``timeout`` and stop; what could not go is counted."""
        scores = self.scores
        if scores is None or scores.idle:
            if scores is not None:
                scores.shutdown(0.0)  # nothing to send: closes at once
            self._shutdown_records(timeout)
            return
        # Scores go out beside the records, not after them: the shutdown keeps its one bound.
        closer = threading.Thread(
            target=scores.shutdown, args=(timeout,), name="promptrail-scores-exit", daemon=True
        )
        closer.start()
        self._shutdown_records(timeout)
        closer.join(timeout + 0.5)

    def _shutdown_records(self, timeout: float) -> None:
        if self.shipper is not None:
            self.shipper.shutdown(timeout)
            return
        if self.processor is None:
            return
        processor, exporter = self.processor, self.exporter
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


def build(
    options: PipelineOptions,
    stats: CaptureStats,
    score_stats: CaptureStats,
    tracer_provider: TracerProvider | None,
    api_key: str,
) -> Pipeline:
    """The records' pipeline (promptrail's own spans, or joined to ``tracer_provider``) and
    the scores' beside it, counting into ``stats`` and ``score_stats``."""
    sender: dict[str, Any] = {
        "export_deadline": options.export_timeout,
        "max_pending_bytes": options.max_bytes,
        "transport": options.transport,
        # Scores ride the same spool as records, in a directory of their own.
        "cache_dir": options.cache_dir,
        "spool_max_bytes": options.spool_max_bytes,
        "spool_max_age": options.spool_max_age,
    }
    scores = Shipper(
        RecordSender(
            options.api_key, options.base_url, stats=score_stats, endpoint=SCORES, **sender
        ),
        score_stats,
        max_bytes=options.max_bytes,
        flush_interval=options.flush_interval,
    )
    if tracer_provider is None:
        # promptrail's own spans hand records to the sender directly (no OpenTelemetry SDK
        # interface on the default path).
        exporter = RecordSender(
            options.api_key,
            options.base_url,
            mask=options.mask,
            stats=stats,
            environment=options.environment,
            **sender,
        )
        shipper = Shipper(
            exporter,
            stats,
            sample_rate=options.sample_rate,
            max_bytes=options.max_bytes,
            flush_interval=options.flush_interval,
        )
        tracer = CaptureTracer(shipper.on_end)
        return Pipeline(tracer, exporter, shipper=shipper, scores=scores, api_key=api_key)
    # The application's SDK provider needs the sender behind its SpanExporter interface.
    span_exporter = PromptrailSpanExporter(
        options.api_key,
        options.base_url,
        mask=options.mask,
        stats=stats,
        environment=options.environment,
        **sender,
    )
    processor = CountingProcessor(
        span_exporter,
        options.sample_rate,
        max_queue_size=options.max_queue_size,
        schedule_delay_millis=options.flush_interval * 1000,
        max_export_batch_size=min(512, options.max_queue_size),
    )
    tracer_provider.add_span_processor(processor)
    return Pipeline(
        tracer_provider.get_tracer("promptrail", __version__),
        span_exporter,
        processor=processor,
        scores=scores,
        api_key=api_key,
    )
