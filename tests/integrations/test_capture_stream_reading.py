"""How a streamed chat completion is read on the application's thread (issue 34).

A for loop over a captured stream gets one generator that reads each chunk inline: no call per
event, and of a chunk of text only its text; a finish reason or usage a chunk of text carries
is read from the latest one when the next chunk without text comes or the stream ends. These
tests hold the record to what reading every field of every chunk gives, on the real ``openai``
SDK reading real server-sent events (an in-process transport plays the server's shapes that
the wire stub does not send).
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import promptrail
from tests.capture import Records
from tests.integrations.chat_streams import USAGE, stream_of, text_of

INTEGRATIONS = str(Path(promptrail.__file__).parent / "integrations")


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-reading",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish}


def openai_style(words: int) -> bytes:
    """OpenAI's shape: the role, the text, an empty delta with the finish, the usage apart."""
    return (
        _event([_choice({"role": "assistant", "content": ""})])
        + b"".join(_event([_choice({"content": f"w{i} "})]) for i in range(words))
        + _event([_choice({}, "stop")])
        + _event([], usage=USAGE)
        + b"data: [DONE]\n\n"
    )


def server_style(words: int) -> bytes:
    """Servers that end on a chunk of text carrying the finish reason and the usage."""
    return (
        _event([_choice({"role": "assistant", "content": ""})])
        + b"".join(_event([_choice({"content": f"w{i} "})]) for i in range(words - 1))
        + _event([_choice({"content": "end"}, "length")], usage=USAGE)
        + b"data: [DONE]\n\n"
    )


def assert_whole(record: dict[str, Any], text: str, finish: str) -> None:
    assert record["output"]["content"] == text
    assert record["output"]["finish_reason"] == finish
    usage = record["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (11, 7)
    assert (usage["cached_tokens"], usage["reasoning_tokens"]) == (4, 2)
    assert record["model"] == "gpt-4o-mini"
    assert record["time_to_first_token_ms"] is not None


@pytest.mark.parametrize(("shape", "finish"), [(openai_style, "stop"), (server_style, "length")])
def test_a_for_loop_and_next_record_the_same(
    capture: str, records: Records, shape: Any, finish: str
) -> None:
    looped = list(stream_of(shape(6)))
    stepped = []
    stream = stream_of(shape(6))
    while True:
        try:
            stepped.append(next(stream))
        except StopIteration:
            break

    newest, oldest = records(expected=2)
    assert text_of(looped) == text_of(stepped) != ""
    for record in (oldest, newest):
        assert_whole(record, text_of(looped), finish)


@pytest.mark.parametrize("shape", [openai_style, server_style])
def test_a_loop_over_the_call_itself_records_the_whole_stream(
    capture: str, records: Records, shape: Any
) -> None:
    # ``for chunk in client.chat.completions.create(...)`` (LlamaIndex's own loop): nothing
    # but the loop's iterator holds the stream. Flushing between chunks ships every ended
    # record, so a record ended before the loop was done would arrive half-read.
    read = []
    for chunk in stream_of(shape(6)):
        read.append(chunk)
        assert promptrail.flush(timeout=10)

    (record,) = records()
    assert_whole(record, text_of(read), "stop" if shape is openai_style else "length")


def test_a_loop_left_on_the_last_chunk_of_text_keeps_its_finish_and_usage(
    capture: str, records: Records
) -> None:
    # The last chunk of text carries the finish and the usage; the loop stops there, before
    # the stream ends: the record still reads them (the proxy's close ends it).
    stream = stream_of(server_style(5))
    read = []
    for chunk in stream:
        read.append(chunk)
        if chunk.choices and chunk.choices[0].finish_reason:
            break
    stream.close()

    (record,) = records()
    assert_whole(record, text_of(read), "length")


def _calls_into_capture(body: bytes) -> int:
    """Python function calls made in promptrail's integrations while a stream is read (a
    generator's resumes are not calls: the loop resumes one per event, as without capture)."""
    stream = stream_of(body)
    counted = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal counted
        code = frame.f_code
        if (
            event == "call"
            and code.co_filename.startswith(INTEGRATIONS)
            and not code.co_flags & inspect.CO_GENERATOR
        ):
            counted += 1

    items: Iterator[Any] = iter(stream)
    sys.setprofile(profile)
    try:
        for _ in items:
            pass
    finally:
        sys.setprofile(None)
    return counted


@pytest.mark.parametrize("shape", [openai_style, server_style])
def test_capture_makes_no_call_per_event(capture: str, shape: Any) -> None:
    # Whatever the stream's length, capture's Python calls while it is read are the same:
    # reading an event is inline in the one generator the loop resumes.
    few, many = _calls_into_capture(shape(10)), _calls_into_capture(shape(200))

    assert few == many
    assert promptrail.flush(timeout=10)
