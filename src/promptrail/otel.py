"""``PromptrailSpanExporter``: an OpenTelemetry span exporter that ships request records.

Use it in your own tracer provider to send GenAI spans (from any instrumentation) to
promptrail::

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from promptrail.otel import PromptrailSpanExporter, TimeOrderedIdGenerator

    provider = TracerProvider(id_generator=TimeOrderedIdGenerator())  # optional: faster reads
    provider.add_span_processor(BatchSpanProcessor(PromptrailSpanExporter()))

Spans that describe a model call (GenAI or OpenInference attributes) or a function observed by
``@promptrail.observe`` become records; other spans are ignored. Records are posted to
``/v1/requests/batch`` zstd- or gzip-compressed, with ids derived from the span ids so a retry is
stored once. While the collector is unreachable, records wait in a bounded buffer and go out
with the next export, flush or shutdown; what has to be dropped is counted by reason
(:func:`promptrail.stats`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import StatusCode

from ._capture.send import DEFAULT_BASE_URL as DEFAULT_BASE_URL  # still importable from here
from ._capture.send import DEFAULT_MAX_PENDING_BYTES as DEFAULT_MAX_PENDING_BYTES
from ._capture.send import QUICK_SHUTDOWN_SECONDS as QUICK_SHUTDOWN_SECONDS
from ._capture.send import Mask as Mask
from ._capture.send import RecordSender
from ._capture.spans import new_trace_id
from ._genai import build_record, is_recordable, span_error

__all__ = ["PromptrailSpanExporter", "TimeOrderedIdGenerator"]


class TimeOrderedIdGenerator(IdGenerator):
    """Trace ids that lead with the trace's start in Unix milliseconds (then 80 random bits),
    as promptrail's own tracer makes them; span ids random.

    A record's id is ``req_<trace id><span id>``: with these ids records sort by time, which
    keeps the collector's reads by record id (list pages' scores, score filters) local.
    Sampling by trace id (OpenTelemetry's ``TraceIdRatioBased`` reads the low 64 bits) is
    unaffected. Optional: any ids work.
    """

    def generate_span_id(self) -> int:
        """A random, non-zero 64-bit span id."""
        return random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        """A 128-bit trace id: the time now in Unix ms (48 bits), then 80 random bits."""
        return new_trace_id(time.time_ns())


def _ids_and_times(span: ReadableSpan) -> tuple[int, int, int | None, int, int]:
    context = span.get_span_context()
    parent = span.parent
    start = span.start_time or 0
    return (
        context.trace_id if context else 0,
        context.span_id if context else 0,
        parent.span_id if parent else None,
        start,
        span.end_time or start,
    )


def _exception_messages(span: ReadableSpan) -> Iterator[str]:
    """The messages of the span's exception events, read as they are asked for."""
    return (
        str(event.attributes.get("exception.message", ""))
        for event in span.events
        if event.name == "exception" and event.attributes
    )


def _span_record(span: ReadableSpan) -> dict[str, Any] | None:
    """The record of a recordable span, else None.

    Runs once per span on the export thread: the exception events are read only when the
    status carries no description.
    """
    attributes = dict(span.attributes or {})
    if not is_recordable(attributes):
        return None
    status = span.status
    return build_record(
        span.name,
        *_ids_and_times(span),
        attributes,
        status.status_code is StatusCode.ERROR,
        span_error(status.description or "", _exception_messages(span)),
    )


class PromptrailSpanExporter(RecordSender, SpanExporter):
    """Export spans as promptrail request records: the capture path's :class:`RecordSender`
    (buffering, retries, counting; the disk spool when given ``cache_dir``) behind the
    OpenTelemetry ``SpanExporter`` interface."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Convert spans to records and send them with whatever is still pending."""
        records = [r for r in (_span_record(s) for s in spans) if r is not None]
        # Out of the processor's queue, into this exporter's hands (see ship()).
        self.stats.add("in_flight", len(records))
        shipped = self.ship(records)
        self.report_recovery()
        return SpanExportResult.SUCCESS if shipped else SpanExportResult.FAILURE

    def shutdown(self, timeout_millis: int = 5_000) -> None:
        """Try once more to send what is pending, then close; what is left is counted."""
        budget = timeout_millis / 1000
        self.final_send(budget)
        self.close(waited=budget)
