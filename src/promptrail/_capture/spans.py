"""Capture's own spans: OpenTelemetry API spans that cost a few microseconds each.

When promptrail owns the tracing (``init()`` without ``tracer_provider``), observed functions
and model calls get a :class:`CaptureSpan` from a :class:`CaptureTracer`. They are real
OpenTelemetry API spans: they become current in the OpenTelemetry context, so spans made by
any other instrumentation inside an observed function join its trace, and
``trace.get_current_span()`` sees them. What they leave out is what the SDK's span does and a
request record does not need: attribute validation and copying, events other than exceptions,
links, span processors, resources. On end, a span goes to the :class:`~.shipping.Shipper`.

Why not the SDK's span: ``benchmarks/sdk_overhead.py`` measures an SDK span carrying a model
call's attributes, through the SDK's BatchSpanProcessor, at about as much time in the
application's thread as the whole budget of a capture (50 µs) — before any of the capture's
own work. src/promptrail/DESIGN.md ("Capture path") has the figures. With
``init(tracer_provider=...)`` capture uses the application's SDK provider and processor
instead, and pays that price.
"""

from __future__ import annotations

import contextvars
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry.util._decorator import _agnosticcontextmanager
from opentelemetry.util.types import Attributes, AttributeValue

from .._context import MAX_ATTRIBUTE_CHARS, to_json
from .._genai import build_record

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_getrandbits = random.getrandbits  # the SDK's RandomIdGenerator uses the same source
_time_ns = time.time_ns
_Span = trace.Span
_LOW_64 = (1 << 64) - 1


def new_trace_id(start_ns: int) -> int:
    """The id of a trace promptrail starts at ``start_ns``: its start in Unix milliseconds
    (48 bits), then 80 random bits.

    A record's id is ``req_<trace id><span id>``, so records then sort by their trace's start,
    as the collector's own ids sort by time: its reads by record id (a list page's scores, a
    score filter's sums) stay within a few granules instead of one per record. AWS X-Ray's
    ids lead with the time the same way; the low 64 bits, which sampling reads
    (``sampling_and_fork.Sampler``), are as random as before.
    """
    return (start_ns // 1_000_000) << 80 | _getrandbits(80)


def _context_getter() -> Callable[[], Context]:
    """The cheapest way to read the current OpenTelemetry context.

    The API's ``get_current()`` goes through two Python calls to reach its ContextVar; with
    the default runtime context (contextvars, the only one the API ships) the ContextVar's
    own ``get`` gives the same object. Any other runtime context keeps the API's function.
    """
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    variable = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(variable, contextvars.ContextVar):
        return variable.get
    return otel_context.get_current


current_context = _context_getter()
"""The current OpenTelemetry context (``opentelemetry.context.get_current()``), read directly."""

OnEnd = Callable[["CaptureSpan"], None]
Describe = Callable[[], tuple[dict[str, Any], dict[str, Any]]]

# The (trace id, span id) of the last record captured in this thread or asyncio task (each has
# its own context): promptrail.last_request_id() formats it only when asked, so ending a span
# pays for one ContextVar.set, not for the id's text.
last_record: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "promptrail_last_record", default=None
)
_set_last_record = last_record.set
logger = logging.getLogger("promptrail")


_encode = msgspec.json.Encoder(enc_hook=repr).encode
_decode = msgspec.json.Decoder().decode


def _as_json(value: Any) -> Any:
    """``value`` as the record will hold it: what ``json.loads(to_json(value))`` gives.

    The record is built from JSON values, and a JSON attribute's text would only be parsed
    back: two compiled calls (a copy the mask may change freely) instead of the standard
    library's encoder and decoder (a third of building a chat call's record).
    """
    if isinstance(value, str):  # text stays text, even text that reads as JSON
        return to_json(value)
    try:
        data = _encode(value)
    except (TypeError, ValueError):  # keys msgspec does not take: the general path
        return to_json(value)
    if len(data) > MAX_ATTRIBUTE_CHARS:  # maybe too long: to_json cuts it by characters
        return to_json(value)
    return _decode(data)


def ids_under(parent: object, start_time: int) -> tuple[int, int, int | None]:
    """The (trace id, span id, parent span id) of a span starting at ``start_time`` under
    ``parent``, the current context's span value when it is not promptrail's own span (whose
    ids a child copies without a call: :meth:`CaptureTracer.start_owned`)."""
    # What trace.get_current_span() gives: anything but a span is no parent.
    parent_context = parent.get_span_context() if isinstance(parent, _Span) else None
    if parent_context is not None and parent_context.is_valid:
        return parent_context.trace_id, _getrandbits(64) or 1, parent_context.span_id
    return new_trace_id(start_time), _getrandbits(64) or 1, None


class CaptureSpan(trace.Span):
    """A span that keeps what a request record needs and hands itself over when it ends."""

    # No __slots__ (the API's Span has a __dict__ anyway): what most spans never set stays a
    # class default, so starting a span assigns only what it has.
    end_time: int | None = None
    _context: SpanContext | None = None
    _error = False
    _description = ""
    _exceptions: list[str] | None = None
    parent_span_id: int | None = None
    # Set by the capture that owns the span: more attributes and JSON attributes, worked out
    # when the record is built (on the shipper's thread), not in the application's.
    describe: Describe | None = None

    def __init__(
        self,
        name: str,
        trace_id: int,
        span_id: int,
        parent_span_id: int | None,
        attributes: dict[str, Any],
        start_time: int,
        on_end: OnEnd,
    ) -> None:
        self.name = name
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.attributes = attributes
        self.start_time = start_time
        self._on_end = on_end

    # -- the OpenTelemetry API ------------------------------------------------------------

    def get_span_context(self) -> SpanContext:
        """The span's context (made on first use: most spans are never asked)."""
        context = self._context
        if context is None:
            context = SpanContext(self.trace_id, self.span_id, False, _SAMPLED)
            self._context = context
        return context

    def is_recording(self) -> bool:
        """True until the span ends."""
        return self.end_time is None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one attribute (ignored once the span has ended)."""
        if self.end_time is None:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Set several attributes (ignored once the span has ended)."""
        if self.end_time is None:
            self.attributes.update(attributes)

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        """Keep an exception event's message (a record has no place for other events)."""
        if name == "exception" and attributes:
            self._add_exception(str(attributes.get("exception.message", "")))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        """Links are not part of a record: ignored."""

    def update_name(self, name: str) -> None:
        """Rename the span."""
        self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the status; an error status makes the record an error."""
        if self.end_time is not None:
            return
        if isinstance(status, Status):
            code, description = status.status_code, status.description
        else:
            code = status
        if code is StatusCode.UNSET:
            return
        self._error = code is StatusCode.ERROR
        self._description = (description or "") if self._error else ""

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Keep the exception's message (the record's error text when no status says more)."""
        self._add_exception(str(exception))

    def end(self, end_time: int | None = None) -> None:
        """End the span (once) and hand it over for shipping."""
        if self.end_time is not None:
            return
        self.end_time = end_time or _time_ns()
        _set_last_record((self.trace_id, self.span_id))
        self._on_end(self)

    # -- the record -----------------------------------------------------------------------

    @property
    def is_error(self) -> bool:
        """Whether the span ended with an error status."""
        return self._error

    def to_record(self) -> dict[str, Any]:
        """The request record of this span (``POST /v1/requests`` JSON)."""
        start = self.start_time
        attributes = self.attributes
        try:
            described = self._described()
        except Exception:  # a response of an unexpected shape: record what is known
            logger.debug("promptrail: could not describe a span", exc_info=True)
            described = None
        if described is not None:
            extra, extra_json = described
            attributes = {**attributes, **extra}
            attributes.update((k, _as_json(v)) for k, v in extra_json.items())
        return build_record(
            self.name,
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            start,
            self.end_time or start,
            attributes,
            self._error,
            self._description or "; ".join(self._exceptions or ()),
        )

    def _described(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """More attributes, and JSON attributes, worked out when the record is built (on the
        shipper's thread): :attr:`describe`'s, if set; a model call's span (the integrations'
        ``CapturedCall``, the call's record itself) describes the call."""
        describe = self.describe
        if describe is None:
            return None
        # What describes the span may refer to it: let both go now, not at the next cyclic
        # garbage collection.
        self.describe = None
        return describe()

    def _add_exception(self, message: str) -> None:
        if self.end_time is not None:
            return
        if self._exceptions is None:
            self._exceptions = []
        self._exceptions.append(message)


class CaptureTracer(trace.Tracer):
    """Make :class:`CaptureSpan` s, children of whatever span is current."""

    def __init__(self, on_end: OnEnd) -> None:
        self.on_end = on_end
        """What every span of this tracer is handed to when it ends (the shipper's queue)."""

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> CaptureSpan:
        """Start a span in the trace of the current (or given) context, or a new trace."""
        return self.start_owned(name, context, dict(attributes) if attributes else {}, start_time)

    def start_owned(
        self,
        name: str,
        context: Context | None,
        attributes: dict[str, Any],
        start_time: int | None = None,
    ) -> CaptureSpan:
        """:meth:`start_span` for promptrail's own callers: the span keeps ``attributes``
        itself (no copy), and the parent is read from the context without the API's helpers
        (this runs for every captured call)."""
        parent = (current_context() if context is None else context).get(_SPAN_KEY)
        if type(parent) is CaptureSpan:
            trace_id: int = parent.trace_id
            parent_id: int | None = parent.span_id
            span_id = _getrandbits(64) or 1
        elif parent is None:  # a new trace: new_trace_id's ids, their random bits in one draw
            start_time = start_time or _time_ns()
            bits = _getrandbits(144)
            trace_id = (start_time // 1_000_000) << 80 | bits >> 64
            span_id, parent_id = (bits & _LOW_64) or 1, None
        else:
            start_time = start_time or _time_ns()
            trace_id, span_id, parent_id = ids_under(parent, start_time)
        return CaptureSpan(
            name,
            trace_id,
            span_id,
            parent_id,
            attributes,
            start_time or _time_ns(),
            self.on_end,
        )

    @_agnosticcontextmanager  # the decorator of the API's own signature (sync and async)
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        """Start a span and make it current for the ``with`` block."""
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
