"""Capture calls of the official ``openai`` SDK (1.x to 3.x).

    import promptrail
    promptrail.instrument("openai")      # or promptrail.instrument() for every provider

Patched (class methods, so every client instance is covered): chat completions (sync, async,
streams, ``with_raw_response``), the Responses API and embeddings. Errors raised by the SDK are
recorded and re-raised unchanged; streams stay the SDK's own objects.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from ._calls import CallRecord, message_texts
from ._patching import Patch
from ._wrappers import Endpoint, sync_and_async

PROVIDER = "openai"

_COMPLETIONS = "openai.resources.chat.completions"
_RESPONSES = "openai.resources.responses"
_EMBEDDINGS = "openai.resources.embeddings"


def _value(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


# -- chat completions ----------------------------------------------------------------------


def _chat_record(kwargs: dict[str, Any]) -> CallRecord:
    messages = kwargs.get("messages", [])
    # The texts are read (if at all) while the record is made, before the call returns.
    return CallRecord(
        PROVIDER, "chat", kwargs, messages, functools.partial(message_texts, messages)
    )


def _chat_result(record: CallRecord, result: Any) -> None:
    # The SDK's own objects read by attribute directly (an attribute of a pydantic model costs
    # less than getattr() with a default, a third of the general reading's time in all);
    # anything else (a dict, another shape) takes the general reading.
    try:
        choices, usage = result.choices, result.usage
        record.model, record.response_id = result.model, result.id
        if choices:
            choice = choices[0]
            content = choice.message.content
            if isinstance(content, str):
                record.text.append(content)
            record.finish_reason = choice.finish_reason
    except AttributeError:
        del record.text[:]
        _any_chat_result(record, result)
        return
    if usage is not None:
        _usage(record, usage, "prompt_tokens", "completion_tokens")


def _any_chat_result(record: CallRecord, result: Any) -> None:
    record.model = _value(result, "model")
    record.response_id = _value(result, "id")
    choices = _value(result, "choices") or []
    if choices:
        message = _value(choices[0], "message")
        content = _value(message, "content") if message is not None else None
        if isinstance(content, str):
            record.text.append(content)
        record.finish_reason = _value(choices[0], "finish_reason")
    _usage(record, _value(result, "usage"), "prompt_tokens", "completion_tokens")


def _chat_chunk(record: CallRecord, chunk: Any) -> None:
    # Runs for every event of a stream that is not the SDK's own (_streams.py's proxy), in
    # the application's thread: read as _chat_result reads.
    text = record.text
    read = len(text)
    try:
        choices, usage = chunk.choices, chunk.usage
        if record.response_id is None:
            record.model, record.response_id = chunk.model, chunk.id
        for choice in choices or ():
            delta = choice.delta
            if delta is not None and delta.content.__class__ is str:
                text.append(delta.content)
            if choice.finish_reason:
                record.finish_reason = choice.finish_reason
    except AttributeError:
        del text[read:]
        _any_chat_chunk(record, chunk)
        return
    if usage is not None:
        _usage(record, usage, "prompt_tokens", "completion_tokens")


def _chat_chunks(record: CallRecord, chunks: list[Any]) -> None:
    """A streamed chat completion's chunks, read into the record at once (``ReadItems``,
    _streams.py: the chunks were kept as the caller read them, nothing else done per chunk).

    One loop and no call per chunk: as _chat_chunk reads, a chunk at a time. The first one
    with an id gives the model and the id; every text, finish reason and usage is taken.
    """
    text = record.text
    append = text.append
    for chunk in chunks:
        read = len(text)
        try:
            choices, usage = chunk.choices, chunk.usage
            if record.response_id is None:
                record.model, record.response_id = chunk.model, chunk.id
            for choice in choices or ():
                delta = choice.delta
                if delta is not None:
                    content = delta.content
                    if content.__class__ is str:
                        append(content)
                reason = choice.finish_reason
                if reason:
                    record.finish_reason = reason
        except AttributeError:  # not the SDK's shape: the general reading
            del text[read:]
            _any_chat_chunk(record, chunk)
            continue
        if usage is not None:
            _usage(record, usage, "prompt_tokens", "completion_tokens")


def _any_chat_chunk(record: CallRecord, chunk: Any) -> None:
    record.model = record.model or _value(chunk, "model")
    record.response_id = record.response_id or _value(chunk, "id")
    for choice in _value(chunk, "choices") or []:
        delta = _value(choice, "delta")
        content = _value(delta, "content") if delta is not None else None
        if isinstance(content, str):
            record.text.append(content)
        reason = _value(choice, "finish_reason")
        if reason:
            record.finish_reason = reason
    _usage(record, _value(chunk, "usage"), "prompt_tokens", "completion_tokens")


def _usage(record: CallRecord, usage: Any, prompt: str, completion: str) -> None:
    if usage is None:
        return
    try:  # the SDK's usage object, by attribute (as _chat_result reads)
        prompt_tokens, completion_tokens = getattr(usage, prompt), getattr(usage, completion)
        prompt_details = getattr(usage, prompt + "_details")
        completion_details = getattr(usage, completion + "_details")
    except AttributeError:  # a dict, or a usage without the details
        prompt_tokens, completion_tokens = _value(usage, prompt), _value(usage, completion)
        prompt_details = _value(usage, prompt + "_details")
        completion_details = _value(usage, completion + "_details")
    if isinstance(prompt_tokens, int):
        record.input_tokens = prompt_tokens
    if isinstance(completion_tokens, int):
        record.output_tokens = completion_tokens
    # OpenAI counts both inside the totals above (docs/api-notes.md, the prompt_tokens rule):
    # chat completions' prompt_tokens_details / completion_tokens_details, the Responses
    # API's input_tokens_details / output_tokens_details.
    if prompt_details is not None:
        cached = _value(prompt_details, "cached_tokens")
        if isinstance(cached, int):
            record.cached_tokens = cached
    if completion_details is not None:
        reasoning = _value(completion_details, "reasoning_tokens")
        if isinstance(reasoning, int):
            record.reasoning_tokens = reasoning


# -- responses and embeddings ----------------------------------------------------------------


def _responses_record(kwargs: dict[str, Any]) -> CallRecord:
    given = kwargs.get("input")

    def texts() -> list[str]:
        found = message_texts(
            given if isinstance(given, list) else [given] if isinstance(given, str) else []
        )
        if isinstance(kwargs.get("instructions"), str):
            found.append(kwargs["instructions"])
        return found

    return CallRecord(PROVIDER, "chat", kwargs, given, texts)


def _responses_result(record: CallRecord, result: Any) -> None:
    record.model = _value(result, "model")
    record.response_id = _value(result, "id")
    text = getattr(result, "output_text", None)
    if isinstance(text, str):
        record.text.append(text)
    record.finish_reason = _value(result, "status")
    _usage(record, _value(result, "usage"), "input_tokens", "output_tokens")


def _responses_event(record: CallRecord, event: Any) -> None:
    kind = _value(event, "type")
    if kind == "response.output_text.delta":
        record.text.append(_value(event, "delta") or "")
    elif kind in ("response.completed", "response.incomplete", "response.failed"):
        response = _value(event, "response")
        if response is not None:
            record.model = _value(response, "model")
            record.response_id = _value(response, "id")
            record.finish_reason = _value(response, "status")
            _usage(record, _value(response, "usage"), "input_tokens", "output_tokens")


def _responses_events(record: CallRecord, events: list[Any]) -> None:
    """A streamed response's events, read into the record at once (``ReadItems``)."""
    for event in events:
        _responses_event(record, event)


def _embeddings_record(kwargs: dict[str, Any]) -> CallRecord:
    return CallRecord(PROVIDER, "embeddings", kwargs, kwargs.get("input"), list)


def _embeddings_result(record: CallRecord, result: Any) -> None:
    record.model = _value(result, "model")
    _usage(record, _value(result, "usage"), "prompt_tokens", "completion_tokens")


# -- what is patched ----------------------------------------------------------------------------


@functools.cache
def _stream_types() -> tuple[type, ...]:
    module = importlib.import_module("openai")
    return (module.Stream, module.AsyncStream)


WRAPPED_METHODS: tuple[Patch, ...] = (
    *sync_and_async(
        _COMPLETIONS,
        "Completions.create",
        Endpoint(_chat_record, _chat_result, _chat_chunk, _stream_types, _chat_chunks),
    ),
    *sync_and_async(
        _RESPONSES,
        "Responses.create",
        Endpoint(
            _responses_record,
            _responses_result,
            _responses_event,
            _stream_types,
            _responses_events,
        ),
    ),
    *sync_and_async(
        _EMBEDDINGS,
        "Embeddings.create",
        Endpoint(_embeddings_record, _embeddings_result, _embeddings_result, _stream_types),
    ),
)
