"""A captured openai stream is the SDK's own object, read at the SDK's own pace (issue 52).

The stream a patched ``create(stream=True)`` returns is the SDK's ``Stream`` itself, its class
swapped for a subclass that records the call when the stream ends, is closed or is dropped,
and its own iterator replaced by the one generator that reads each chunk on its way: a for
loop over it resumes as many Python frames per event as over an uncaptured stream, and the
chunks it has passed on are not kept. These tests hold the record to what the caller read, on
the real ``openai`` SDK reading real server-sent events from an in-process transport.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import weakref
from types import FrameType
from typing import Any

import pytest

import promptrail
from tests.capture import Records
from tests.provider_clients import openai_answering

MESSAGES = [{"role": "user", "content": "Count for me"}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-in-place",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _text(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": {"content": content}, "finish_reason": finish}


def body_of(words: int) -> bytes:
    """The role, ``words`` chunks of text, the finish, the usage apart, [DONE]."""
    return (
        _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        + b"".join(_event([_text(f"w{i} ")]) for i in range(words))
        + _event([_text("", "stop")])
        + _event([], usage=USAGE)
        + b"data: [DONE]\n\n"
    )


def _answer(body: bytes) -> Any:
    import httpx2

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return answer


def client_of(body: bytes) -> Any:
    import httpx2
    import openai

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://provider.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(_answer(body))),
    )


def async_client_of(body: bytes) -> Any:
    import httpx2
    import openai

    return openai.AsyncOpenAI(
        api_key="sk-test",
        base_url="http://provider.invalid/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_answer(body))),
    )


def stream_of(client: Any) -> Any:
    return client.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )


def words(count: int) -> str:
    return "".join(f"w{i} " for i in range(count))


def _frames_resumed(stream: Any) -> int:
    """Python frames entered (calls and generator resumes, in any module) while a for loop
    reads ``stream`` to its end."""
    entered = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal entered
        if event == "call":
            entered += 1

    items = iter(stream)
    gc.disable()  # a finaliser run mid-loop would count its own frames
    sys.setprofile(profile)
    try:
        for _ in items:
            pass
    finally:
        sys.setprofile(None)
        gc.enable()
    return entered


def _per_event() -> float:
    for _ in stream_of(client_of(body_of(10))):  # the SDK's first parse fills its caches
        pass
    few, many = (_frames_resumed(stream_of(client_of(body_of(n)))) for n in (10, 110))
    return (many - few) / 100


def test_a_for_loop_resumes_no_more_frames_per_event_than_the_bare_sdk(
    capture: str, records: Records
) -> None:
    # Each layer between the caller's loop and the SDK's own generator costs every event a
    # resume. Captured, the loop takes the one generator that reads the chunks in place of
    # the SDK's own pass-through one.
    captured = _per_event()
    promptrail.uninstrument()
    bare = _per_event()

    # A layer more would cost a resume every event (+1.0); a frame or two a call that differs
    # between a short and a long stream (a resting shipper woken by one of them, a branch of
    # the finish chunk's reading) moves the figure by hundredths.
    assert abs(captured - bare) < 0.5
    promptrail.instrument()
    newest, *_ = records(expected=3)
    assert newest["output"]["content"] == words(110)


def test_the_stream_is_the_sdks_own_object(capture: str, records: Records) -> None:
    import openai

    stream = stream_of(client_of(body_of(3)))

    assert isinstance(stream, openai.Stream)
    assert type(stream).__name__ == "Stream"
    assert stream.response.status_code == 200
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == words(3)
    (record,) = records()
    assert record["output"]["content"] == words(3)
    assert record["output"]["finish_reason"] == "stop"
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (11, 7)
    assert record["time_to_first_token_ms"] is not None


def test_a_long_stream_is_recorded_whole_without_holding_every_chunk(
    capture: str, records: Records
) -> None:
    # Thousands of events: the chunks already read are let go on the way, as without
    # capture (the caller keeps none of them here).
    stream = stream_of(client_of(body_of(1000)))
    items = iter(stream)
    first = weakref.ref(next(items))
    for _ in range(600):
        next(items)
    gc.collect()

    assert first() is None
    for _ in items:
        pass
    (record,) = records()
    assert record["output"]["content"] == words(1000)
    assert record["usage"]["completion_tokens"] == 7


def test_a_stream_that_breaks_off_is_recorded_as_an_error_with_what_came(
    capture: str, records: Records
) -> None:
    import httpx2
    import openai

    def broken() -> Any:
        yield _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        yield _event([_text("half ")])
        raise httpx2.ReadError("the provider went away")

    client = openai_answering(broken())
    read = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream_of(client):
            read.append(chunk.choices[0].delta.content)

    (record,) = records()
    assert read == ["", "half "]
    assert record["status"] == "error"
    assert "APIConnectionError" in record["error"]
    assert record["output"]["content"] == "half "


@pytest.mark.parametrize("how", ["exhausted", "closed_early", "context_left_early", "next"])
def test_an_async_stream_is_recorded_however_it_ends(
    capture: str, records: Records, how: str
) -> None:
    import openai

    async def read() -> list[str]:
        async with async_client_of(body_of(5)) as client:
            stream = await stream_of(client)
            assert isinstance(stream, openai.AsyncStream)
            pieces: list[str] = []
            if how == "exhausted":
                pieces = [c.choices[0].delta.content async for c in stream if c.choices]
            elif how == "closed_early":
                async for chunk in stream:
                    pieces.append(chunk.choices[0].delta.content)
                    if len(pieces) == 3:
                        break
                await stream.close()
            elif how == "context_left_early":
                async with stream:
                    async for chunk in stream:
                        pieces.append(chunk.choices[0].delta.content)
                        if len(pieces) == 2:
                            break
            else:
                pieces = [(await anext(stream)).choices[0].delta.content for _ in range(4)]
                await stream.aclose()
            return pieces

    pieces = asyncio.run(read())

    (record,) = records()
    assert record["output"]["content"] == "".join(pieces)
    assert record["time_to_first_token_ms"] is not None
    if how == "exhausted":
        assert "".join(pieces) == words(5)
        assert record["usage"]["completion_tokens"] == 7
        assert record["output"]["finish_reason"] == "stop"


def _response_event(kind: str, **fields: Any) -> bytes:
    data = {"type": kind, "sequence_number": 0, **fields}
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def test_a_streamed_responses_call_is_recorded(capture: str, records: Records) -> None:
    done = {
        "id": "resp_in_place",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o-mini",
        "status": "completed",
        "output": [],
        "usage": {
            "input_tokens": 9,
            "output_tokens": 3,
            "total_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    body = b"".join(
        _response_event(
            "response.output_text.delta",
            delta=piece,
            item_id="msg_1",
            output_index=0,
            content_index=0,
        )
        for piece in ("one ", "two ", "three")
    ) + _response_event("response.completed", response=done)

    events = list(client_of(body).responses.create(model="gpt-4o-mini", input="Count", stream=True))

    (record,) = records()
    assert [e.type for e in events][-1] == "response.completed"
    assert record["output"]["content"] == "one two three"
    assert record["output"]["finish_reason"] == "completed"
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (9, 3)
    assert record["model"] == "gpt-4o-mini"
