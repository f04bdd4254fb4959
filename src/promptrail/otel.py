"""``PromptrailSpanExporter``: an OpenTelemetry span exporter that ships request records.

Use it in your own tracer provider to send GenAI spans (from any instrumentation) to
promptrail::

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from promptrail.otel import PromptrailSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(PromptrailSpanExporter()))

Spans that describe a model call (GenAI or OpenInference attributes) or a function observed by
``@promptrail.observe`` become records; other spans are ignored. Records are posted to
``/v1/requests/batch`` gzip-compressed, with ids derived from the span ids so a retry is
stored once. While the collector is unreachable, records wait in a bounded buffer and go out
with the next export, flush or shutdown; what has to be dropped is counted by reason
(:func:`promptrail.stats`).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

from ._genai import SpanData, build_record, is_recordable
from ._process import restart_after_fork
from ._stats import CaptureStats

__all__ = ["PromptrailSpanExporter", "readable_span_data"]

logger = logging.getLogger("promptrail")

Mask = Callable[[dict[str, Any]], dict[str, Any]]

# A 500 is the collector's own failure (bad input is a 4xx): worth another try.
_RETRYABLE = {429, 500, 502, 503, 504}
_BATCH = 1000
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def readable_span_data(span: ReadableSpan) -> SpanData:
    """Describe an SDK span for the record mapping."""
    trace_id, span_id, parent_span_id, start_ns, end_ns = _ids_and_times(span)
    return SpanData(
        name=span.name,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=dict(span.attributes or {}),
        is_error=span.status.status_code is StatusCode.ERROR,
        status_message=span.status.description or "",
        exception_messages=_exception_messages(span),
    )


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


def _exception_messages(span: ReadableSpan) -> list[str]:
    return [
        str(event.attributes.get("exception.message", ""))
        for event in span.events
        if event.name == "exception" and event.attributes
    ]


def _span_record(span: ReadableSpan) -> dict[str, Any] | None:
    """``span_to_record(readable_span_data(span))`` for recordable spans, else None.

    Runs once per span on the export thread, so it skips the intermediate SpanData and
    only reads the exception events when the status carries no description.
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
        status.description or "; ".join(_exception_messages(span)),
    )


class PromptrailSpanExporter(SpanExporter):
    """Export spans as promptrail request records."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 10.0,
        export_deadline: float = 10.0,
        max_pending: int = 10_000,
        mask: Mask | None = None,
        stats: CaptureStats | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Ship to ``base_url`` (``PROMPTRAIL_BASE_URL``) with ``api_key`` (``PROMPTRAIL_API_KEY``).

        ``export_deadline`` bounds the time one export (retries included) may take;
        ``max_pending`` bounds the records kept while the collector is unreachable.
        """
        self._api_key = api_key or os.environ.get("PROMPTRAIL_API_KEY", "")
        self._base_url = (
            base_url or os.environ.get("PROMPTRAIL_BASE_URL") or DEFAULT_BASE_URL
        ).rstrip("/")
        self._timeout = timeout
        self._deadline = export_deadline
        self._max_pending = max_pending
        self._mask = mask
        self.stats = stats or CaptureStats()
        self._transport = transport
        self._pending: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._stopping = threading.Event()
        self._client = self._new_client()
        restart_after_fork(self)

    def _new_client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self._base_url,
            headers={"Authorization": f"Bearer {self._api_key}", "User-Agent": "promptrail-python"},
            timeout=self._timeout,
            transport=self._transport,
        )

    def _after_fork(self) -> None:
        # The parent's connections and pending records are the parent's: start clean.
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending = deque()
        self._client = self._new_client()

    @property
    def pending(self) -> int:
        """Records waiting for the collector."""
        return len(self._pending)

    # -- SpanExporter ----------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Convert spans to records and send them with whatever is still pending."""
        records = [r for r in (_span_record(s) for s in spans) if r is not None]
        return SpanExportResult.SUCCESS if self.ship(records) else SpanExportResult.FAILURE

    def ship(self, records: list[dict[str, Any]]) -> bool:
        """Mask ``records`` and send them with whatever is still pending.

        False when the collector did not take everything within the export deadline (what
        is left waits, bounded, for the next export, flush or shutdown).
        """
        if self._mask is not None:
            records = [r for r in (self._masked(r) for r in records) if r is not None]
        self._enqueue(records)
        return self._send(self._deadline)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Send every pending record, retrying until ``timeout_millis``."""
        return self._send(timeout_millis / 1000)

    def stop_retrying(self) -> None:
        """Cut every retry wait short from now on (shutdown is coming)."""
        self._stopping.set()

    def shutdown(self, timeout_millis: int = 5_000) -> None:
        """Try once more to send what is pending, then close; what is left is counted."""
        self._stopping.set()
        self._send(min(timeout_millis / 1000, self._deadline))
        with self._lock:
            lost = len(self._pending)
            self._pending.clear()
        if lost:
            self.stats.drop("shutdown_unsent", lost)
            logger.warning("promptrail: %d records not sent before shutdown", lost)
        self._client.close()

    # -- internals -------------------------------------------------------------------------

    def _masked(self, record: dict[str, Any]) -> dict[str, Any] | None:
        assert self._mask is not None
        try:
            return self._mask(record)
        except Exception:
            # Never ship a record the mask could not clean.
            self.stats.drop("mask_error")
            logger.exception("promptrail: mask failed; record dropped")
            return None

    def _enqueue(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            self._pending.extend(records)
            overflow = len(self._pending) - self._max_pending
            for _ in range(max(0, overflow)):
                self._pending.popleft()
        if overflow > 0:
            self.stats.drop("pending_full", overflow)

    def _send(self, budget: float) -> bool:
        deadline = time.monotonic() + max(0.0, budget)
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            with self._send_lock:
                while True:
                    with self._lock:
                        batch = [self._pending[i] for i in range(min(_BATCH, len(self._pending)))]
                    if not batch:
                        return True
                    if not self._post_with_retries(batch, deadline):
                        return False
                    with self._lock:
                        for _ in range(len(batch)):
                            self._pending.popleft()
        finally:
            detach(token)

    def _post_with_retries(self, batch: list[dict[str, Any]], deadline: float) -> bool:
        """Post one batch; True once it is settled (stored, or refused for good)."""
        # Level 1: records repeat themselves, so it still shrinks a batch about tenfold, for
        # a third of level 5's CPU time in the application's process.
        body = gzip.compress(json.dumps({"records": batch}, default=str).encode(), compresslevel=1)
        attempt = 0
        while True:
            wait = self._post(batch, body)
            if wait is None:
                return True
            attempt += 1
            backoff = min(wait if wait > 0 else 0.5 * 2**attempt, 30.0)
            backoff *= random.uniform(0.5, 1.0) if wait <= 0 else 1.0
            if time.monotonic() + backoff > deadline or self._stopping.is_set():
                self.stats.add("export_retries_deferred")
                return False
            self.stats.add("export_retries")
            self._stopping.wait(backoff)

    def _post(self, batch: list[dict[str, Any]], body: bytes) -> float | None:
        """Send once; None when settled, else seconds to wait (0: use backoff)."""
        try:
            response = self._client.post(
                "/v1/requests/batch",
                content=body,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        except httpx.HTTPError as exc:
            logger.debug("promptrail: collector unreachable: %s", exc)
            return 0.0
        if response.status_code in _RETRYABLE:
            return _retry_after(response)
        if response.status_code == 201:
            data = response.json().get("data", {})
            rejected = data.get("rejected", [])
            self.stats.add("exported", int(data.get("accepted", 0)))
            if rejected:
                self.stats.drop("rejected", len(rejected))
                logger.warning(
                    "promptrail: collector rejected %d records: %s", len(rejected), rejected[0]
                )
            return None
        reason = {400: "rejected", 401: "unauthorized", 413: "too_large"}.get(
            response.status_code, "http_error"
        )
        self.stats.drop(reason, len(batch))
        logger.warning(
            "promptrail: collector refused %d records (%s): %s",
            len(batch),
            response.status_code,
            response.text[:300],
        )
        return None


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("Retry-After", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return 0.0
