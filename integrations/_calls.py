"""One captured model call: a CLIENT span with GenAI attributes, ended exactly once."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation import _SPAN_KEY

from promptrail import _genai, _runtime
from promptrail._capture.spans import (
    _LOW_64,
    CaptureSpan,
    CaptureTracer,
    OnEnd,
    _as_json,
    _getrandbits,
    _set_last_record,
    _time_ns,
    current_context,
    ids_under,
)
from promptrail._context import (
    MAX_ATTRIBUTE_CHARS,
    OUTSIDE,
    call_attributes,
    framework_call,
    rendered,
    to_json,
)
from promptrail._context import _current as _observation_variable
from promptrail._genai import LINK_KEYS as _LINK_KEYS
from promptrail._genai import _loads, model_call_record

logger = logging.getLogger("promptrail")
_observation = _observation_variable.get

# Request parameters recorded as gen_ai.request.* (the semantic conventions' names).
_REQUEST_PARAMETERS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
}


def suppressed() -> bool:
    """Whether instrumentation is switched off here (promptrail's own export, for one).

    Also inside a model call a framework integration records itself (LangChain): the
    provider call under it is that same call, recorded once, by the framework.
    """
    # Two context reads, no call through the OpenTelemetry API's helpers: this runs first in
    # every model call.
    if current_context().get(_SUPPRESS_INSTRUMENTATION_KEY):
        return True
    call = framework_call()
    return call is not None and call.open


def is_raw_response(result: Any) -> bool:
    """Whether ``result`` is a ``with_raw_response`` answer (``parse()`` gives the object).

    Decided once per type: asking a pydantic model for a missing attribute raises inside
    pydantic, which costs more than the rest of a call's capture.
    """
    kind = type(result)
    known = _raw_types.get(kind)
    if known is None:
        known = callable(getattr(result, "parse", None)) and hasattr(result, "http_response")
        _raw_types[kind] = known
    return known


_raw_types: dict[type, bool] = {}


def message_texts(messages: Any) -> list[str]:
    """The text contents of chat messages, for linking a call to a rendered template."""
    texts: list[str] = []
    if isinstance(messages, str):
        return [messages]
    for message in messages if isinstance(messages, list | tuple) else []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                part["text"]
                for part in content
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
    return texts


class CallRecord:
    """The record of one model call; the provider modules feed it and end it.

    Under promptrail's own tracing (the common case) ``CallRecord(...)`` gives a
    :class:`CapturedCall`, the call's span and record in one object: the application's thread
    only notes the call's context and the few fields it needs of what came back, and the
    attributes (request parameters, model, usage, output, the JSON of the messages) are worked
    out on the shipper's thread when the record is built. Under an OpenTelemetry SDK tracer
    provider it is this class, around the SDK's span, whose attributes are set before it ends,
    as the SDK requires.
    """

    # No __slots__: what most calls never set stays a class default, so a call assigns only
    # what it has (this runs in the application's thread, on every model call).
    _ended = False
    _first_token_at: int | None = None  # time.time_ns(), as the span's start
    model: str | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    # Counted inside input_tokens (every input token, cached or not) and output_tokens.
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    # A stream's latest item, read only in part on its way (its text), and how to read the
    # rest of it (finish reason, usage): finish() reads it, however the stream ends.
    tail: Any = None
    read_tail: Callable[[CallRecord, Any], None] | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> CallRecord:
        """The record of one call: a :class:`CapturedCall` under promptrail's own tracer
        (``__init__`` takes the arguments)."""
        if cls is CallRecord and type(_runtime.tracer()) is CaptureTracer:
            captured: CallRecord = object.__new__(CapturedCall)
            return captured
        return object.__new__(cls)

    def __init__(
        self,
        provider: str,
        operation: str,
        kwargs: Mapping[str, Any],
        call_input: Any,
        texts: Callable[[], list[str]],
        parent: Context | None = None,
    ) -> None:
        model = kwargs.get("model")
        self._provider = provider
        self._operation = operation
        self.span: Span = _runtime.tracer().start_span(
            f"{operation} {model}" if model else operation,
            context=parent,  # None: the current context's span
            kind=SpanKind.CLIENT,
            attributes=call_attributes(texts),
        )
        self._kwargs = kwargs
        self._call_input = call_input
        if self.span.is_recording():
            self.span.set_attributes(self._request_attributes())
            self.span.set_attribute(_genai.CALL_INPUT, to_json(call_input))
        self.start_time = time.time_ns()
        self.text: list[str] = []

    def first_token(self) -> None:
        """Note the arrival of the first piece of output (streams)."""
        if self._first_token_at is None:
            self._first_token_at = time.time_ns()

    def done(self, read: Callable[[CallRecord, Any], None], result: Any) -> None:
        """End the span with the call's result; ``read(record, result)`` takes what it needs.

        Read now, in the application's thread, even for promptrail's own span: a few
        attributes cost a microsecond or two, where keeping the response object until the
        shipper reads it would hold the SDK's whole object tree (most of a queued span's
        memory), and a burst would fill the queue's budget three times sooner.
        """
        self._read(read, result)
        self.finish()

    def _read(self, read: Callable[[CallRecord, Any], None], result: Any) -> None:
        try:
            read(self, result)
        except Exception:  # a response of an unexpected shape: record the call without it
            logger.debug("promptrail: could not read a response", exc_info=True)

    def finish(self) -> None:
        """End the span with what was collected (idempotent)."""
        # Without a lock: two threads finishing at once (a stream closed while the garbage
        # collector finalises its proxy) would at worst ship the record twice, and the
        # collector stores a record id once.
        if self._ended:
            return
        self._ended = True
        tail, read_tail = self.tail, self.read_tail
        if tail is not None and read_tail is not None:
            self.tail = None
            self._read(read_tail, tail)
        span = self.span
        if span.is_recording():
            attributes, output = self._response_attributes()
            attributes["gen_ai.output.messages"] = to_json(output)
            span.set_attributes(attributes)
        span.end()

    def fail(self, exc: BaseException) -> None:
        """End the span as an error (the exception goes on to the caller unchanged)."""
        if self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.finish()

    def _describe(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The span's attributes and JSON attributes (on the shipper's thread)."""
        attributes = self._request_attributes()
        response, output = self._response_attributes()
        attributes.update(response)
        return attributes, {_genai.CALL_INPUT: self._call_input, "gen_ai.output.messages": output}

    def _request_attributes(self) -> dict[str, Any]:
        kwargs = self._kwargs
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": self._operation,
            "gen_ai.provider.name": self._provider,
        }
        model = kwargs.get("model")
        if isinstance(model, str):
            attributes["gen_ai.request.model"] = model
        for key, name in _REQUEST_PARAMETERS.items():
            value = kwargs.get(key)
            if value is not None and isinstance(value, int | float) and not isinstance(value, bool):
                attributes[name] = value
        return attributes

    def _response_attributes(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response's attributes, and the output messages (not yet JSON)."""
        attributes: dict[str, Any] = {}
        if self.model:
            attributes["gen_ai.response.model"] = self.model
        if self.response_id:
            attributes["gen_ai.response.id"] = self.response_id
        if self.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [self.finish_reason]
        if self.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = self.input_tokens
        if self.output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = self.output_tokens
        for name, count in (
            (_genai.CACHE_READ_TOKENS, self.cached_tokens),
            (_genai.CACHE_WRITE_TOKENS, self.cache_write_tokens),
            (_genai.REASONING_TOKENS, self.reasoning_tokens),
        ):
            if count:
                attributes[name] = count
        if self._first_token_at is not None:
            attributes[_genai.TIME_TO_FIRST_TOKEN] = max(
                0, (self._first_token_at - self.start_time) // 1_000_000
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "parts": [{"type": "text", "content": "".join(self.text)}],
        }
        if self.finish_reason:
            message["finish_reason"] = self.finish_reason
        return attributes, [message]


class CapturedCall(CaptureSpan, CallRecord):
    """A model call under promptrail's own tracing: its span and its record in one object.

    What ``CallRecord(...)`` gives when capture owns the tracing. The application's thread
    notes only what must be read there: the parent and the clock (the span's ids), the
    observation's attributes, copies of the arguments the application could change once the
    call returns, then what the provider module reads of the result (a few fields, a stream's
    text pieces). The request and response attributes are worked out on the shipper's thread
    (:meth:`_described`), and the span is queued as it is when it ends.

    One object, not a record beside a span it describes: no second instance, no bound method
    and no reference cycle per call (docs/benchmarks.md, "SDK overhead, black-box harness":
    each object a streamed call makes on the calling thread costs several times its time
    alone).
    """

    # A stream read from its body's bytes (openai's chat stream, captured in place): the
    # pieces as they came, how many events the caller took, and how to read them; read on
    # the shipper's thread, when the record is built (_read_body).
    body: list[bytes] | None = None
    events = 0
    read_body: Callable[[CallRecord, bytes, int], None] | None = None
    body_bytes = 0  # the body's size, once read: what the shipper's memory estimate learns

    # Made without CallRecord.__new__ (object's own, in C): whoever makes one has looked at
    # the tracer already (CallRecord.__new__, or a provider's hot path: openai._chat_record).
    __new__ = object.__new__

    def __init__(
        self,
        provider: str,
        operation: str,
        kwargs: Mapping[str, Any],
        call_input: Any,
        texts: Callable[[], list[str]] | None,
        parent: Context | None = None,
        on_end: OnEnd | None = None,
    ) -> None:
        """``on_end``: the tracer's (a provider's hot path passes it; read when None).

        ``texts`` None: the texts of ``call_input``'s chat messages (:func:`message_texts`),
        read only when they are needed (a template rendered, an observation open).
        """
        # CaptureTracer.start_owned's work, inline: this runs for every captured call.
        parent_span = (current_context() if parent is None else parent).get(_SPAN_KEY)
        start = _time_ns()
        if parent_span is None:  # a new trace: new_trace_id's ids, their random bits in one draw
            bits = _getrandbits(144)
            self.trace_id = (start // 1_000_000) << 80 | bits >> 64
            self.span_id = (bits & _LOW_64) or 1
        elif type(parent_span) is CaptureSpan:  # inside an observed function
            self.trace_id = parent_span.trace_id
            self.span_id = _getrandbits(64) or 1
            self.parent_span_id = parent_span.span_id
        else:
            self.trace_id, self.span_id, self.parent_span_id = ids_under(parent_span, start)
        model = kwargs.get("model")
        self.name = f"{operation} {model}" if model else operation
        # call_attributes(texts), whose answer is {} outside every observed function while
        # no template was rendered (the common case), without the call.
        if rendered._items or _observation() is not OUTSIDE:
            if texts is None:
                texts = functools.partial(message_texts, call_input)
            self.attributes = call_attributes(texts)
        else:
            self.attributes = {}
        self.start_time = start
        self._on_end = on_end or _runtime.tracer().on_end  # type: ignore[attr-defined]
        self._provider = provider
        self._operation = operation
        # Copies: the application may change its arguments once the call returns (append
        # to its messages, for one) before the shipper's thread reads them.
        self._kwargs = dict(kwargs)
        self._call_input = call_input.copy() if type(call_input) is list else call_input
        self.text = []

    def finish(self) -> None:
        """End the call with what was collected (idempotent): queued for the shipper."""
        if self.end_time is not None:  # as CallRecord.finish: no lock
            return
        tail = self.tail
        if tail is not None and self.read_tail is not None:
            self.tail = None
            self._read(self.read_tail, tail)
        # CaptureSpan.end, inline (the span has no other way to end).
        self.end_time = _time_ns()
        _set_last_record((self.trace_id, self.span_id))
        self._on_end(self)

    def fail(self, exc: BaseException) -> None:
        """End the call as an error (the exception goes on to the caller unchanged)."""
        self.record_exception(exc)
        self.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.finish()

    def to_record(self) -> dict[str, Any]:
        """The request record (on the shipper's thread): straight from the call's fields when
        the span carries nothing else, else through its attributes as any span's is built."""
        if self.body is not None:
            self._read_body()
        attributes = self.attributes
        if self.describe is None and (not attributes or attributes.keys() <= _LINK_KEYS):
            try:
                record = self._direct_record(attributes)
            except Exception:  # a field of an unexpected type: the general path says what
                record = None
            if record is not None:
                return record
        return super().to_record()

    def _direct_record(self, linked: dict[str, Any]) -> dict[str, Any] | None:
        """:func:`_genai.model_call_record` of this call; None where the output's JSON
        would not come back as it went (the general path's round trip and its length cap)."""
        content = "".join(self.text)
        reason = self.finish_reason
        if reason is None:
            reason = ""
        elif type(reason) is not str:
            return None
        # A character takes at most six bytes of JSON (a control character's escape): below
        # this the output's JSON is never cut (_as_json, MAX_ATTRIBUTE_CHARS).
        if (len(content) + len(reason)) * 6 + 200 > MAX_ATTRIBUTE_CHARS:
            return None
        output: dict[str, Any] = {"content": content}
        if reason:
            output["finish_reason"] = reason
        response_id = self.response_id
        if response_id and isinstance(response_id, str):
            output["response_id"] = response_id
        start = self.start_time
        return model_call_record(
            self.name,
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            start,
            self.end_time or start,
            linked,
            self._error,
            self._description or "; ".join(self._exceptions or ()),
            self._operation,
            self._provider,
            (self.model, self._kwargs.get("model")),
            output,
            (
                self.input_tokens,
                self.output_tokens,
                self.cached_tokens,
                self.cache_write_tokens,
                self.reasoning_tokens,
            ),
            self._first_token_at,
            _loads(_as_json(self._call_input)),
        )

    def _read_body(self) -> None:
        """Read what the stream's body held into the record (once, on the shipper's thread)."""
        pieces, self.body = self.body, None
        read = self.read_body
        if pieces and read is not None:
            body = b"".join(pieces)
            self.body_bytes = len(body)
            try:
                read(self, body, self.events)
            except Exception:  # a body of an unexpected shape: record the call without it
                logger.debug("promptrail: could not read a streamed response", exc_info=True)

    def _described(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self.body is not None:
            self._read_body()
        attributes, json_attributes = self._describe()
        more = super()._described()  # what else set ``describe`` on the span, if anything
        if more is not None:
            attributes.update(more[0])
            json_attributes.update(more[1])
        return attributes, json_attributes
