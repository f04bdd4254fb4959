"""One captured model call: a CLIENT span with GenAI attributes, ended exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, get_value
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import _genai, _runtime
from .._context import call_attributes, to_json
from .._spans import CaptureSpan

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
    """Whether instrumentation is switched off here (promptrail's own export, for one)."""
    return bool(get_value(_SUPPRESS_INSTRUMENTATION_KEY))


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
    """The span of one model call; the provider modules feed it and end it."""

    __slots__ = (
        "_ended",
        "_first_token_at",
        "_lock",
        "_started",
        "finish_reason",
        "input_tokens",
        "model",
        "output_tokens",
        "response_id",
        "span",
        "text",
    )

    def __init__(
        self,
        provider: str,
        operation: str,
        kwargs: Mapping[str, Any],
        call_input: Any,
        texts: Callable[[], list[str]],
    ) -> None:
        model = kwargs.get("model")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": provider,
        }
        if isinstance(model, str):
            attributes["gen_ai.request.model"] = model
        for key, name in _REQUEST_PARAMETERS.items():
            value = kwargs.get(key)
            # Most parameters are not given: skip those before the (slower) type checks.
            if value is not None and isinstance(value, int | float) and not isinstance(value, bool):
                attributes[name] = value
        attributes.update(call_attributes(texts))
        tracer = _runtime.tracer()
        self.span = span = tracer.start_span(
            f"{operation} {model}" if model else operation,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        # promptrail's own span serialises on the shipper's thread (a copy of a list: the
        # application may append to its messages once the call returns); an SDK span takes
        # JSON text only.
        if isinstance(span, CaptureSpan):
            span.set_json_attribute(
                _genai.CALL_INPUT, call_input.copy() if type(call_input) is list else call_input
            )
        elif span.is_recording():
            span.set_attribute(_genai.CALL_INPUT, to_json(call_input))
        self._started = time.monotonic()
        self._first_token_at: float | None = None
        self._ended = False
        self._lock = threading.Lock()
        self.text: list[str] = []
        self.model: str | None = None
        self.response_id: str | None = None
        self.finish_reason: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def first_token(self) -> None:
        """Note the arrival of the first piece of output (streams)."""
        if self._first_token_at is None:
            self._first_token_at = time.monotonic()

    def finish(self) -> None:
        """End the span with what was collected (idempotent)."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        span = self.span
        if span.is_recording():
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
            if self._first_token_at is not None:
                attributes[_genai.TIME_TO_FIRST_TOKEN] = int(
                    (self._first_token_at - self._started) * 1000
                )
            message: dict[str, Any] = {
                "role": "assistant",
                "parts": [{"type": "text", "content": "".join(self.text)}],
            }
            if self.finish_reason:
                message["finish_reason"] = self.finish_reason
            span.set_attributes(attributes)
            if isinstance(span, CaptureSpan):
                span.set_json_attribute("gen_ai.output.messages", [message])
            else:
                span.set_attribute("gen_ai.output.messages", to_json([message]))
        span.end()

    def fail(self, exc: BaseException) -> None:
        """End the span as an error (the exception goes on to the caller unchanged)."""
        if self.span.is_recording():
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.finish()
