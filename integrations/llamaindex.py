"""LlamaIndex: its instrumentation spans as the parents of the model calls inside them.

    import promptrail
    promptrail.init()
    promptrail.instrument()   # with llama-index installed: the dispatcher's spans are captured

LlamaIndex's calls to OpenAI (``llama-index-llms-openai``) and Anthropic go through their
SDKs, which promptrail's provider patches record: one record per provider call, as without
LlamaIndex. This module adds LlamaIndex's own structure: every span of its instrumentation
dispatcher (``OpenAI.chat``, a query engine's ``query``, a function decorated with
``dispatcher.span``) becomes a record too, the parent of what runs inside it, in one trace;
the span is current in OpenTelemetry while its method runs, so the provider call's record
nests under it. A streaming method (``stream_chat``, ``astream_chat``, ``stream_complete``)
returns a generator that makes the provider call when it is first advanced, after the
method's span has ended: its span is current again while that generator runs
(:class:`_StreamParent`).
"""

from __future__ import annotations

import inspect
import types
import weakref
from contextvars import Token
from typing import Any, TypeAlias

from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.span_handlers import BaseSpanHandler
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel, PrivateAttr

from promptrail import _genai, _runtime
from promptrail._capture.spans import CaptureSpan
from promptrail._context import call_attributes, to_json

from ._stand_in import StandInSpan


def _no_texts() -> list[str]:
    return []


class SpanHandler(BaseSpanHandler[Any]):
    """Turn LlamaIndex dispatcher spans into promptrail spans (see the module)."""

    _open: dict[str, tuple[Span, Token[otel_context.Context]]] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        """The handler's name in LlamaIndex's registry."""
        return "PromptrailSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Start the span, under its LlamaIndex parent (else the current span); make it current."""
        parent = self._open.get(parent_id) if parent_id else None
        context = trace.set_span_in_context(parent[0]) if parent else None
        attributes = call_attributes(_no_texts)
        attributes[_genai.OBSERVATION] = "llamaindex"
        # ids are "<Class>.<method>-<uuid4>"
        span = _runtime.tracer().start_span(
            id_.split("-", 1)[0], context=context, attributes=attributes
        )
        arguments = {k: v for k, v in bound_args.arguments.items() if k != "self"}
        _set_json(span, _genai.INPUT_VARIABLES, arguments)
        token = otel_context.attach(trace.set_span_in_context(span))
        self._open[id_] = (span, token)

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        """End the span with the method's result."""
        span = self._close(id_)
        if span is not None:
            _set_json(span, _genai.OUTPUT, result)
            span.end()
            if isinstance(result, types.GeneratorType | types.AsyncGeneratorType):
                _StreamParent.attach(result, span)

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        """End the span as an error."""
        span = self._close(id_)
        if span is None:
            return
        if err is not None and span.is_recording():
            span.record_exception(err)
            span.set_status(Status(StatusCode.ERROR, f"{type(err).__name__}: {err}"))
        span.end()

    def _close(self, id_: str) -> Span | None:
        opened = self._open.pop(id_, None)
        if opened is None:
            return None
        span, token = opened
        otel_context.detach(token)
        return span

    # BaseSpanHandler's abstract hooks; span_enter/exit/drop above do the work.
    def new_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused (see :meth:`span_enter`)."""

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused (see :meth:`span_exit`)."""

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused (see :meth:`span_drop`)."""


Stream: TypeAlias = "types.GeneratorType[Any, Any, Any] | types.AsyncGeneratorType[Any, Any]"

# A stream's span: the innermost dispatcher span that returned it (a span around a function
# that returns ``llm.stream_chat(...)`` returns the same generator).
_stream_spans: weakref.WeakKeyDictionary[Stream, Span] = weakref.WeakKeyDictionary()


class _StreamParent(StandInSpan):
    """The current span after a dispatcher span returned a generator: the stream's span
    while the generator runs, the span that was current before at any other time.

    The dispatcher gives a span handler the generator but returns it itself, so the handler
    cannot wrap it, and a generator runs in the context of whoever advances it. So this span
    is left current in the caller's context (as a ``with`` block of the caller's ends, it goes
    with it); the provider call the generator makes on its first step sees the stream's span,
    while what the caller does between the call and the stream (or between chunks) sees the
    span it saw before. Every other operation goes to the span it stands for at the time.
    """

    def __init__(self, stream: Stream, before: Span) -> None:
        self._stream = weakref.ref(stream)
        self._before = before

    @classmethod
    def attach(cls, stream: Stream, span: Span) -> None:
        """Stand for ``span`` while ``stream`` runs, in the current context, from now on."""
        _stream_spans.setdefault(stream, span)
        before = trace.get_current_span()
        # one a finished stream left behind stands for its own ``before`` only: skip it, so a
        # loop of streamed calls does not build a chain
        while isinstance(before, _StreamParent) and before._stream_done():
            before = before._before
        otel_context.attach(trace.set_span_in_context(cls(stream, before)))

    def _stream_done(self) -> bool:
        stream = self._stream()
        if stream is None:
            return True
        if isinstance(stream, types.GeneratorType):
            return stream.gi_frame is None
        return stream.ag_frame is None

    def _span(self) -> Span:
        stream = self._stream()
        if stream is not None:
            running = (
                stream.gi_running if isinstance(stream, types.GeneratorType) else stream.ag_running
            )
            if running and (span := _stream_spans.get(stream)) is not None:
                return span
        return self._before._span() if isinstance(self._before, _StreamParent) else self._before


def _set_json(span: Span, key: str, value: Any) -> None:
    """Set a JSON attribute: on promptrail's spans, worked out on the shipper's thread."""
    if isinstance(span, CaptureSpan):
        previous = span.describe

        def describe() -> tuple[dict[str, Any], dict[str, Any]]:
            attributes, json_attributes = previous() if previous else ({}, {})
            return attributes, {**json_attributes, key: _plain(value)}

        span.describe = describe
    elif span.is_recording():
        span.set_attribute(key, to_json(_plain(value)))


def _plain(value: Any, depth: int = 0) -> Any:
    """LlamaIndex's pydantic objects (messages, responses, nodes) as JSON-able values."""
    if depth > 6:
        return repr(value)
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json", exclude_none=True)
        except Exception:
            return repr(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return value


_handler: SpanHandler | None = None


def instrument() -> None:
    """Capture LlamaIndex's dispatcher spans (idempotent)."""
    global _handler
    if _handler is None:
        _handler = SpanHandler()
        get_dispatcher().add_span_handler(_handler)


def uninstrument() -> None:
    """Stop capturing LlamaIndex's dispatcher spans."""
    global _handler
    if _handler is not None:
        dispatcher = get_dispatcher()
        dispatcher.span_handlers = [h for h in dispatcher.span_handlers if h is not _handler]
        _handler = None
