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
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from promptrail import _runtime
from promptrail._capture.spans import CaptureTracer

from ._calls import CallRecord, CapturedCall, message_texts
from ._patching import Patch
from ._wrappers import Endpoint, sync_and_async

PROVIDER = "openai"
_time_ns = time.time_ns
_json_decode = msgspec.json.decode

_COMPLETIONS = "openai.resources.chat.completions"
_RESPONSES = "openai.resources.responses"
_EMBEDDINGS = "openai.resources.embeddings"


def _value(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


# A usage object's fields: the counts, then their details (chat completions; the Responses
# API). Spelled out, not joined per call: a name made at run time is a new string each time,
# which misses the interpreter's attribute cache on every lookup.
_CHAT_USAGE = (
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "completion_tokens_details",
)
_RESPONSES_USAGE = (
    "input_tokens",
    "output_tokens",
    "input_tokens_details",
    "output_tokens_details",
)


# -- chat completions ----------------------------------------------------------------------


def _chat_record(kwargs: dict[str, Any]) -> CallRecord:
    messages = kwargs.get("messages", [])
    # _runtime.tracer(), inline once capture is set up (one Python call fewer a call).
    pipeline = _runtime._pipeline
    tracer = pipeline.tracer if pipeline is not None else _runtime.tracer()
    if type(tracer) is CaptureTracer:  # CallRecord.__new__'s choice, one call fewer
        # No texts: a CapturedCall reads the messages' texts itself, only when a template was
        # rendered or an observation is open (most calls make no partial then).
        record: CallRecord = CapturedCall(
            PROVIDER, "chat", kwargs, messages, None, None, tracer.on_end
        )
        return record
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
        _usage(record, usage, _CHAT_USAGE)


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
    _usage(record, _value(result, "usage"), _CHAT_USAGE)


def _chat_chunk(record: CallRecord, chunk: Any) -> None:
    # Runs for every event read with next() (a for loop takes _chat_stream), in the
    # application's thread: read as _chat_result reads.
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
        _usage(record, usage, _CHAT_USAGE)


def _chat_stream(record: CallRecord, stream: Iterable[Any], _proxy: object) -> Iterator[Any]:
    """A streamed chat completion's chunks, read inline (a ``ReadStream``, _streams.py): a
    stream the SDK's own decoder reads under promptrail's own tracer is read from its body
    instead (``Endpoint.read_body``, :func:`_chat_body`).

    Capture's cost per event is this loop: no call per chunk of text, and of it only its text
    (in place, every name the loop reads costs the calling thread several times what it costs
    timed alone: docs/benchmarks.md, "SDK overhead, black-box harness"). What else a chunk of
    text could carry (a finish reason, usage: the last one's, on some servers; the id and
    model, when the first chunk had none) is read from the latest such chunk when the next
    chunk without text comes (the finish, the usage: those are read whole,
    :func:`_chat_whole`) or the stream ends (``CallRecord.tail``). The first chunk (model, id,
    time to first token) is read whole.
    """
    try:
        chunks = iter(stream)  # one iterator for both loops (an error here fails the call)
        for chunk in chunks:
            record._first_token_at = _time_ns()  # record.first_token(), inline
            _chat_chunk(record, chunk)
            yield chunk
            break
        record.read_tail = _chat_tail
        append = record.text.append
        for chunk in chunks:
            try:
                # One choice, the common case (several choices stream one per chunk too):
                # unpacked, not looped over, which costs as much as reading an attribute.
                (choice,) = chunk.choices
                content = choice.delta.content
            except (TypeError, ValueError, AttributeError):
                # No choice (the usage), several, a delta of None, not the SDK's shape.
                content = choice = None
            if isinstance(content, str) and content:
                append(content)
                record.tail = chunk
            elif choice is None:
                _chat_whole(record, chunk, append)
            else:  # one choice without text (the role, a tool call's delta, the finish)
                tail = record.tail
                if tail is not None:  # what came before it first
                    record.tail = None
                    # A chunk of text seldom carries more (a finish reason, usage): looked
                    # at here, and read by the call only when it does (one call fewer).
                    try:
                        plain = tail.usage is None and not tail.choices[0].finish_reason
                    except (AttributeError, IndexError, TypeError):
                        plain = False
                    if not plain or record.response_id is None:
                        _chat_tail(record, tail)
                _chat_tail(record, chunk)
            yield chunk
    except GeneratorExit:  # left early: the stream's close(), __exit__ or finaliser records it
        raise
    except BaseException as exc:
        record.fail(exc)
        raise
    record.finish()


class _BodyDelta(msgspec.Struct):
    content: Any = None


class _BodyChoice(msgspec.Struct):
    delta: _BodyDelta | None = None
    finish_reason: Any = None


class _BodyChunk(msgspec.Struct):
    """What a record reads of a chunk; msgspec skips the rest without building it."""

    id: Any = None
    model: Any = None
    choices: list[_BodyChoice] | None = None
    usage: Any = None


_decode_chunks = msgspec.json.Decoder(list[_BodyChunk]).decode


def _chat_body(record: CallRecord, body: bytes, events: int) -> None:
    """Read a streamed chat completion's first ``events`` events from its body's bytes, as
    the chunks would have been read (on the shipper's thread): one decoding call for them
    all when the events have the SDK's shape, else each read as :func:`_any_chat_chunk`."""
    data = _sse_data(body, events)
    try:
        chunks = _decode_chunks(b"[" + b",".join(data) + b"]")
    except msgspec.DecodeError:  # another shape (or not JSON): the general reading
        for item in data:
            _any_chat_chunk(record, _json_decode(item))
        return
    text = record.text
    for chunk in chunks:
        if record.response_id is None:
            record.model, record.response_id = chunk.model, chunk.id
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None and isinstance(delta.content, str):
                text.append(delta.content)
            if choice.finish_reason:
                record.finish_reason = choice.finish_reason
        if chunk.usage is not None:
            _usage(record, chunk.usage, _CHAT_USAGE)


def _sse_data(body: bytes, events: int) -> list[bytes]:
    """The data of the body's first ``events`` server-sent events, as the SDK's decoder
    gives them to its stream: OpenAI's own shape (one ``data:`` line an event, lines ended
    by LF alone) split at once, any other through the SDK's decoder."""
    blocks = body.split(b"\n\n")
    del blocks[-1]  # an event ends with a blank line: what follows the last one is not one
    if (
        body.count(b"\n") == 2 * len(blocks)  # no line ends but the events' own
        and b"\r" not in body
        and all(map(bytes.startswith, blocks, _DATA_FIELDS))
    ):
        return [block[6:] for block in blocks[:events]]
    from openai._streaming import SSEDecoder

    data: list[bytes] = []
    for sse in SSEDecoder().iter_bytes(iter((body,))):
        if len(data) == events:
            break
        data.append(sse.data.encode())
    return data


_DATA_FIELDS = itertools.repeat(b"data: ")  # endless: map() over it stops with the blocks


def _chat_whole(record: CallRecord, chunk: Any, append: Callable[[str], None]) -> None:
    """A chunk that is not one choice's text: its text, then the latest chunk of text and
    this one read whole (the role, a tool call's delta, the finish, the usage)."""
    try:
        choices = chunk.choices
    except AttributeError:  # not the SDK's shape: the general reading
        _any_chat_chunk(record, chunk)
        return
    if not _chat_texts(append, choices):  # several choices, each with text
        record.tail = chunk
        return
    tail = record.tail
    if tail is not None:  # what came before it first
        record.tail = None
        _chat_tail(record, tail)
    _chat_tail(record, chunk)


def _chat_texts(append: Callable[[str], None], choices: Any) -> bool:
    """Append the choices' text; whether the chunk is to be read whole (a choice without text:
    the role, a tool call's delta, the finish; or no choice at all, the usage)."""
    whole = not choices
    for choice in choices or ():
        delta = _value(choice, "delta")
        content = _value(delta, "content") if delta is not None else None
        if isinstance(content, str) and content:
            append(content)
        else:
            whole = True
    return whole


def _chat_tail(record: CallRecord, chunk: Any) -> None:
    """What a chunk has besides its text: its choices' finish reasons, its usage, and its id
    and model while the record has none (a first chunk without them)."""
    if record.response_id is None:
        record.model, record.response_id = _value(chunk, "model"), _value(chunk, "id")
    try:  # the SDK's chunk, by attribute (as _chat_chunk reads); anything else by _value
        usage = chunk.usage
        for choice in chunk.choices or ():
            if choice.finish_reason:
                record.finish_reason = choice.finish_reason
    except AttributeError:
        usage = _value(chunk, "usage")
        for choice in _value(chunk, "choices") or ():
            reason = _value(choice, "finish_reason")
            if reason:
                record.finish_reason = reason
    if usage is not None:
        _usage(record, usage, _CHAT_USAGE)


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
    _usage(record, _value(chunk, "usage"), _CHAT_USAGE)


def _usage(record: CallRecord, usage: Any, names: tuple[str, ...]) -> None:
    if usage is None:
        return
    prompt, completion, prompt_details_name, completion_details_name = names
    try:  # the SDK's usage object, by attribute (as _chat_result reads)
        prompt_tokens, completion_tokens = getattr(usage, prompt), getattr(usage, completion)
        prompt_details = getattr(usage, prompt_details_name)
        completion_details = getattr(usage, completion_details_name)
    except AttributeError:  # a dict, or a usage without the details
        prompt_tokens, completion_tokens = _value(usage, prompt), _value(usage, completion)
        prompt_details = _value(usage, prompt_details_name)
        completion_details = _value(usage, completion_details_name)
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
    _usage(record, _value(result, "usage"), _RESPONSES_USAGE)


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
            _usage(record, _value(response, "usage"), _RESPONSES_USAGE)


def _embeddings_record(kwargs: dict[str, Any]) -> CallRecord:
    return CallRecord(PROVIDER, "embeddings", kwargs, kwargs.get("input"), list)


def _embeddings_result(record: CallRecord, result: Any) -> None:
    record.model = _value(result, "model")
    _usage(record, _value(result, "usage"), _CHAT_USAGE)


# -- what is patched ----------------------------------------------------------------------------


@functools.cache
def _stream_types() -> tuple[type, ...]:
    module = importlib.import_module("openai")
    return (module.Stream, module.AsyncStream)


WRAPPED_METHODS: tuple[Patch, ...] = (
    *sync_and_async(
        _COMPLETIONS,
        "Completions.create",
        Endpoint(
            _chat_record,
            _chat_result,
            _chat_chunk,
            _stream_types,
            _chat_stream,
            read_body=_chat_body,
        ),
    ),
    *sync_and_async(
        _RESPONSES,
        "Responses.create",
        Endpoint(_responses_record, _responses_result, _responses_event, _stream_types),
    ),
    *sync_and_async(
        _EMBEDDINGS,
        "Embeddings.create",
        Endpoint(_embeddings_record, _embeddings_result, _embeddings_result, _stream_types),
    ),
)
