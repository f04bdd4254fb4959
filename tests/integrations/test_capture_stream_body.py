"""A streamed chat completion read from its body (issue 52.3).

Under promptrail's own tracer, a loop over a captured openai stream (sync or async) only
passes the SDK's chunks on and counts them; the body's bytes are kept on their way to the
SDK's decoder, and the record reads the events the caller took on the shipper's thread.
These tests hold that record to what the chunks the caller got say, whatever the body's
framing (cut anywhere between network reads, CRLF line ends, comments, data over several
lines), however far the caller read, and hold the shipper's memory estimate to the bodies
it keeps. Real ``openai`` SDK, real server-sent events from an in-process transport, a live
collector.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from promptrail import _runtime
from tests.capture import Records
from tests.integrations.chat_streams import USAGE, stream_of, text_of


def _chunks(words: int) -> list[dict[str, Any]]:
    """OpenAI's shape: the role, the text, an empty delta with the finish, the usage apart."""

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": "chatcmpl-body",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": choices,
            **extra,
        }

    return [
        chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}]),
        *(chunk([{"index": 0, "delta": {"content": f"w{i} é "}}]) for i in range(words)),
        chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        chunk([], usage=USAGE),
    ]


def plain(words: int) -> bytes:
    """One ``data:`` line an event, LF line ends: what OpenAI sends."""
    events = [b"data: " + json.dumps(c).encode() for c in _chunks(words)]
    return b"".join(event + b"\n\n" for event in [*events, b"data: [DONE]"])


def crlf(words: int) -> bytes:
    return plain(words).replace(b"\n", b"\r\n")


def commented(words: int) -> bytes:
    """Keep-alive comments between events, an ``event:`` field, data over two lines."""
    parts = [b": keep-alive\n\n"]
    for chunk in _chunks(words):
        text = json.dumps(chunk, indent=1).encode()
        head, _, tail = text.partition(b"\n")
        parts.append(b"event: message\ndata: " + head + b"\ndata: " + tail.replace(b"\n", b" "))
        parts.append(b"\n\n: ping\n\n")
    return b"".join(parts) + b"data: [DONE]\n\n"


def in_pieces(body: bytes, size: int) -> Iterator[bytes]:
    """The body cut into network reads of ``size`` bytes, across events and characters."""
    return (body[start : start + size] for start in range(0, len(body), size))


@pytest.mark.parametrize(
    ("shape", "piece"),
    [(plain, None), (plain, 7), (plain, 1), (crlf, None), (crlf, 5), (commented, None)],
)
def test_the_record_holds_what_the_chunks_said_whatever_the_framing(
    capture: str, records: Records, shape: Any, piece: int | None
) -> None:
    body = shape(6)
    chunks = list(stream_of(body if piece is None else in_pieces(body, piece)))

    (record,) = records()
    assert text_of(chunks) == "".join(f"w{i} é " for i in range(6))
    assert record["output"]["content"] == text_of(chunks)
    assert record["output"]["finish_reason"] == "stop"
    usage = record["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (11, 7)
    assert (usage["cached_tokens"], usage["reasoning_tokens"]) == (4, 2)
    assert record["model"] == "gpt-4o-mini"
    assert record["output"]["response_id"] == "chatcmpl-body"
    assert record["time_to_first_token_ms"] is not None


@pytest.mark.parametrize("shape", [plain, commented])
@pytest.mark.parametrize("read", [1, 3, 7])
def test_a_stream_left_early_records_only_what_the_caller_took(
    capture: str, records: Records, shape: Any, read: int
) -> None:
    # The transport hands the SDK the whole body in one read: the record still holds only
    # the chunks the caller took, as when each chunk was read on its way.
    stream = stream_of(shape(6))
    taken = [next(stream) for _ in range(read)]
    stream.close()

    (record,) = records()
    assert record["output"]["content"] == text_of(taken)
    assert record["status"] == "success"


def test_the_memory_estimate_counts_the_bodies_queued_streams_hold(
    capture: str, records: Records
) -> None:
    # A queued streamed call holds its body until the shipper builds its record: once the
    # shipper has seen such calls, each queued call is counted at least its body's size.
    body = plain(400)
    for _ in range(3):
        for _ in stream_of(body):
            pass
    records(expected=3)
    pipeline = _runtime._pipeline
    assert pipeline is not None and pipeline.shipper is not None

    assert pipeline.shipper._span_bytes >= len(body)


def test_a_chunk_of_another_shape_is_read_as_any_chunk_is(capture: str, records: Records) -> None:
    # A server's usage chunk with a null choice: not the shape the one-call decoding takes,
    # so every event is read by the general reading, and the record holds the same.
    odd = json.loads(b"".join(plain(3).split(b"\n\n")[-3:-2])[6:])
    odd["choices"] = [None]
    body = plain(3).replace(plain(3).split(b"\n\n")[-3], b"data: " + json.dumps(odd).encode())
    for _ in stream_of(body):
        pass

    (record,) = records()
    assert record["output"]["content"] == "w0 é w1 é w2 é "
    assert record["output"]["finish_reason"] == "stop"
    assert record["usage"]["completion_tokens"] == 7


async def _read_async(pieces: list[bytes], take: int | None) -> list[Any]:
    """An ``AsyncOpenAI`` stream over ``pieces`` (one network read each): read whole, or
    ``take`` chunks and then closed."""
    import httpx2
    import openai

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    async with openai.AsyncOpenAI(
        api_key="sk-test",
        base_url="http://provider.invalid/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    ) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Count for me"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        if take is None:
            return [chunk async for chunk in stream]
        taken = [await anext(stream) for _ in range(take)]
        await stream.close()
        return taken


@pytest.mark.parametrize(("shape", "piece"), [(plain, None), (plain, 7), (commented, 5)])
def test_an_async_stream_is_read_from_its_body_too(
    capture: str, records: Records, shape: Any, piece: int | None
) -> None:
    body = shape(6)
    pieces = [body] if piece is None else list(in_pieces(body, piece))
    chunks = asyncio.run(_read_async(pieces, None))

    (record,) = records()
    assert text_of(chunks) == "".join(f"w{i} é " for i in range(6))
    assert record["output"]["content"] == text_of(chunks)
    assert record["output"]["finish_reason"] == "stop"
    assert record["usage"]["completion_tokens"] == 7
    assert record["time_to_first_token_ms"] is not None


@pytest.mark.parametrize("read", [1, 4])
def test_an_async_stream_left_early_records_only_what_the_caller_took(
    capture: str, records: Records, read: int
) -> None:
    taken = asyncio.run(_read_async([plain(6)], read))

    (record,) = records()
    assert record["output"]["content"] == text_of(taken)
