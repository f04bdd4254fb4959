"""A captured model call is its span and its record in one object (issue 52, point 3).

Under promptrail's own tracing a model call's record is the span itself: the application's
thread notes the parent, the clock, copies of the arguments and what it reads of the result,
and the record is described on the shipper's thread. These tests hold what a user sees of
that: the trace a call joins (none, an observed function's, another instrumentation's span),
arguments the application changes once the call has returned, and a streamed call whose
first chunk carries no id or model (read from a later chunk, however the stream ends). Real
``openai`` SDK, real server-sent events from an in-process transport, a live collector.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

import promptrail
from tests.capture import Records
from tests.provider_clients import openai_answering

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
COMPLETION = {
    "id": "chatcmpl-one-object",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello."},
            "finish_reason": "stop",
        }
    ],
    "usage": USAGE,
}


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {"object": "chat.completion.chunk", "created": 1, "choices": choices, **extra}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _identified(**extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-later", "model": "gpt-4o-mini-2024-07-18", **extra}


def _text(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": {"content": content}, "finish_reason": finish}


def first_chunk_without_id(server_style: bool) -> bytes:
    """A stream whose first chunk (the role) has no id or model; the chunks after it do.
    OpenAI's shape ends on a finish chunk and the usage apart; other servers end on a chunk
    of text carrying both."""
    role = _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    if server_style:
        body = _event([_text("one ")], **_identified()) + _event(
            [_text("two", "length")], **_identified(usage=USAGE)
        )
    else:
        body = (
            _event([_text("one ")], **_identified())
            + _event([_text("two")], **_identified())
            + _event([_text("", "stop")], **_identified())
            + _event([], **_identified(usage=USAGE))
        )
    return role + body + b"data: [DONE]\n\n"


def plain_client() -> Any:
    return openai_answering(json.dumps(COMPLETION).encode(), "application/json")


@pytest.mark.parametrize("server_style", [False, True], ids=["openai", "server"])
def test_a_stream_whose_first_chunk_has_no_id_is_recorded_with_a_later_chunks_model(
    capture: str, records: Records, server_style: bool
) -> None:
    stream = openai_answering(first_chunk_without_id(server_style)).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Count"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices]

    (record,) = records()
    assert "".join(pieces) == record["output"]["content"] == "one two"
    assert record["model"] == "gpt-4o-mini-2024-07-18"  # the response's, not the request's
    assert record["output"]["finish_reason"] == ("length" if server_style else "stop")
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (11, 7)
    assert record["time_to_first_token_ms"] is not None


def test_a_stream_closed_after_the_first_chunk_of_text_takes_its_model(
    capture: str, records: Records
) -> None:
    # The first chunk has no id; the loop stops on the next one (text): close() reads it.
    stream = openai_answering(first_chunk_without_id(False)).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Count"}], stream=True
    )
    items = iter(stream)
    next(items)
    assert next(items).choices[0].delta.content == "one "
    stream.close()

    (record,) = records()
    assert record["output"]["content"] == "one "
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    assert record["status"] == "success"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_arguments_changed_after_the_call_leave_its_record_as_sent(
    capture: str, records: Records, stream: bool
) -> None:
    # A chat loop reuses its history and its arguments: appending the answer and the next
    # question, changing a parameter for the next call, before the shipper builds the record.
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]
    arguments: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2}
    if stream:
        body = (
            _event([_text("Hello.", "stop")], **_identified())
            + _event([], **_identified(usage=USAGE))
            + b"data: [DONE]\n\n"
        )
        answer = "".join(
            c.choices[0].delta.content
            for c in openai_answering(body).chat.completions.create(
                **arguments, stream=True, stream_options={"include_usage": True}
            )
            if c.choices
        )
    else:
        answer = plain_client().chat.completions.create(**arguments).choices[0].message.content

    messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": "And again?"})
    arguments["temperature"] = 1.5
    arguments["model"] = "gpt-4o"

    (record,) = records()
    assert record["input"] == [{"role": "user", "content": "Say hello."}]
    assert record["output"]["content"] == "Hello."
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    assert record["span_name"] == "chat gpt-4o-mini"


def test_a_model_call_joins_the_trace_it_is_made_in(capture: str, records: Records) -> None:
    client = plain_client()

    def ask() -> None:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )

    ask()  # no span around it: a trace of its own

    @promptrail.observe(name="answer")
    def observed() -> None:
        ask()

    observed()
    # Another instrumentation's span (W3C context from an incoming request, say).
    foreign = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    with trace.use_span(NonRecordingSpan(foreign)):
        ask()

    recorded = records(expected=4)
    (function,) = (r for r in recorded if r["span_name"] == "answer")
    (under_foreign,) = (r for r in recorded if r["trace_id"].startswith("0af765"))
    (under_function,) = (r for r in recorded if r["parent_span_id"] == function["span_id"])
    (alone,) = (r for r in recorded if r not in (function, under_foreign, under_function))
    assert alone["parent_span_id"] is None
    assert alone["trace_id"] not in (function["trace_id"], under_foreign["trace_id"])
    assert function["span_name"] == "answer"
    assert under_function["trace_id"] == function["trace_id"]
    assert under_function["parent_span_id"] == function["span_id"]
    assert under_foreign["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert under_foreign["parent_span_id"] == "b7ad6b7169203331"
    assert len({r["span_id"] for r in (alone, under_function, under_foreign)}) == 3
    assert all(r["model"] == "gpt-4o-mini-2024-07-18" for r in (alone, under_function))


def _tool_delta(index: int, arguments: str, **first: Any) -> dict[str, Any]:
    call = {"index": index, "function": {"arguments": arguments}, **first}
    return {"index": 0, "delta": {"content": None, "tool_calls": [call]}, "finish_reason": None}


def tool_call_stream() -> bytes:
    """A tool call: the role, the call's deltas (no content), the finish, the usage apart."""
    started = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    return (
        _event([{"index": 0, "delta": {"role": "assistant", "content": None}}], **_identified())
        + _event([{**_tool_delta(0, ""), "delta": {"tool_calls": [{"index": 0, **started}]}}])
        + b"".join(_event([_tool_delta(0, piece)], **_identified()) for piece in ('{"a"', ": 1}"))
        + _event([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], **_identified())
        + _event([], **_identified(usage=USAGE))
        + b"data: [DONE]\n\n"
    )


def two_choices_stream() -> bytes:
    """``n=2``: each choice's text in chunks of its own, then one chunk carrying both, then
    each choice's finish, the usage apart."""

    def text(index: int, content: str) -> dict[str, Any]:
        return {"index": index, "delta": {"content": content}, "finish_reason": None}

    return (
        _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}], **_identified())
        + _event([text(0, "a1 ")], **_identified())
        + _event([text(1, "b1 ")], **_identified())
        + _event([text(0, "a2 "), text(1, "b2 ")], **_identified())
        + _event([{"index": 0, "delta": {}, "finish_reason": "stop"}], **_identified())
        + _event([{"index": 1, "delta": {}, "finish_reason": "length"}], **_identified())
        + _event([], **_identified(usage=USAGE))
        + b"data: [DONE]\n\n"
    )


def read_whole(chunks: list[Any]) -> tuple[str, str | None, int | None]:
    """What reading every field of every chunk gives: every choice's text in order, the last
    finish reason, the last usage's completion tokens."""
    text, finish, completion = "", None, None
    for chunk in chunks:
        for choice in chunk.choices:
            if isinstance(choice.delta.content, str):
                text += choice.delta.content
            finish = choice.finish_reason or finish
        if chunk.usage is not None:
            completion = chunk.usage.completion_tokens
    return text, finish, completion


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        (tool_call_stream, ("", "tool_calls", 7)),
        (two_choices_stream, ("a1 b1 a2 b2 ", "length", 7)),
    ],
    ids=["tool_call", "two_choices"],
)
def test_a_streams_record_holds_what_reading_every_chunk_whole_gives(
    capture: str, records: Records, shape: Any, expected: tuple[str, str, int]
) -> None:
    chunks = list(
        openai_answering(shape()).chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Go"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    (record,) = records()
    assert read_whole(chunks) == expected
    text, finish, completion = expected
    assert record["output"]["content"] == text
    assert record["output"]["finish_reason"] == finish
    assert record["usage"]["completion_tokens"] == completion
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    assert record["status"] == "success"
