"""Capture calls of the official ``anthropic`` SDK (0.40 to 2.x).

    import promptrail
    promptrail.instrument("anthropic")

Patched: ``messages.create`` (sync, async, ``stream=True``) and ``messages.stream`` (the helper
keeps working: the raw event stream underneath ``MessageStream`` is what gets wrapped, so
``text_stream``, ``get_final_message()`` and the rest are untouched).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import wrapt

from ._calls import CallRecord, message_texts, suppressed
from ._patching import Patch
from ._streams import AsyncStreamProxy, SyncStreamProxy
from ._wrappers import Endpoint, sync_and_async

PROVIDER = "anthropic"

_MESSAGES = "anthropic.resources.messages"


def _value(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _record(kwargs: dict[str, Any]) -> CallRecord:
    messages = list(kwargs.get("messages", []))
    system = kwargs.get("system")

    def texts() -> list[str]:
        found = message_texts(messages)
        if isinstance(system, str):
            found.append(system)
        return found

    call_input: Any = messages if system is None else {"system": system, "messages": messages}
    return CallRecord(PROVIDER, "chat", kwargs, call_input, texts)


def _usage(record: CallRecord, usage: Any) -> None:
    """Take the counts ``usage`` gives (message_delta's are cumulative: the latest wins).

    Anthropic's ``input_tokens`` leave out the prompt's cache reads and writes: the record's
    input tokens are all three (docs/api-notes.md, the prompt_tokens rule).
    """
    if usage is None:
        return
    read = _value(usage, "cache_read_input_tokens")
    if isinstance(read, int):
        record.cached_tokens = read
    written = _value(usage, "cache_creation_input_tokens")
    if isinstance(written, int):
        record.cache_write_tokens = written
    input_tokens = _value(usage, "input_tokens")
    if isinstance(input_tokens, int):
        record.input_tokens = (
            input_tokens + (record.cached_tokens or 0) + (record.cache_write_tokens or 0)
        )
    output_tokens = _value(usage, "output_tokens")
    if isinstance(output_tokens, int):
        record.output_tokens = output_tokens
    details = _value(usage, "output_tokens_details")
    thinking = _value(details, "thinking_tokens") if details is not None else None
    if isinstance(thinking, int):
        record.reasoning_tokens = thinking


def _message(record: CallRecord, message: Any) -> None:
    record.model = _value(message, "model")
    record.response_id = _value(message, "id")
    record.finish_reason = _value(message, "stop_reason")
    for block in _value(message, "content") or []:
        text = _value(block, "text")
        if _value(block, "type") == "text" and isinstance(text, str):
            record.text.append(text)
    _usage(record, _value(message, "usage"))


def _event(record: CallRecord, event: Any) -> None:
    kind = _value(event, "type")
    if kind == "message_start":
        message = _value(event, "message")
        record.model = _value(message, "model")
        record.response_id = _value(message, "id")
        _usage(record, _value(message, "usage"))
    elif kind == "content_block_delta":
        delta = _value(event, "delta")
        text = _value(delta, "text")
        if isinstance(text, str):
            record.text.append(text)
    elif kind == "message_delta":
        delta = _value(event, "delta")
        record.finish_reason = _value(delta, "stop_reason") or record.finish_reason
        _usage(record, _value(event, "usage"))


@functools.cache
def _stream_types() -> tuple[type, ...]:
    module = importlib.import_module("anthropic")
    return (module.Stream, module.AsyncStream)


class _StreamManager(wrapt.ObjectProxy[Any]):
    """``messages.stream(...)``'s manager: on enter, the raw stream inside is wrapped."""

    def __init__(self, wrapped: Any, kwargs: dict[str, Any]) -> None:
        super().__init__(wrapped)
        self._self_kwargs = kwargs

    def __enter__(self) -> Any:
        stream = self.__wrapped__.__enter__()
        record = _record(self._self_kwargs)
        stream._raw_stream = SyncStreamProxy(stream._raw_stream, record, _event)
        return stream

    def __exit__(self, *exc_info: Any) -> Any:
        return self.__wrapped__.__exit__(*exc_info)

    async def __aenter__(self) -> Any:
        stream = await self.__wrapped__.__aenter__()
        record = _record(self._self_kwargs)
        stream._raw_stream = AsyncStreamProxy(stream._raw_stream, record, _event)
        return stream

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.__wrapped__.__aexit__(*exc_info)


def _stream(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    manager = wrapped(*args, **kwargs)
    return manager if suppressed() else _StreamManager(manager, kwargs)


WRAPPED_METHODS: tuple[Patch, ...] = (
    *sync_and_async(
        _MESSAGES, "Messages.create", Endpoint(_record, _message, _event, _stream_types)
    ),
    Patch(_MESSAGES, "Messages.stream", _stream),
    Patch(_MESSAGES, "AsyncMessages.stream", _stream),
)
