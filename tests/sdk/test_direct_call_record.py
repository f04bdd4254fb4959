"""A model call's record is built straight from the call's fields (issue 52, point 3).

The shipper's thread shares the GIL with the application, so the record of a captured model
call is built from the call's own fields instead of through its span attributes (set, then
looked up again under every attribute generation's names, the output and input turned into
JSON and back). The record must be the very one the attribute path gives, key order included
(the JSON posted is the same bytes): each test builds a call, ends it, and compares
``to_record()`` with the general path's (``CaptureSpan.to_record``). Real ``CapturedCall``
objects, and real ``openai`` streams captured by promptrail's own tracer.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import promptrail
from promptrail import _genai, _runtime
from promptrail._capture.spans import CaptureSpan, CaptureTracer
from promptrail._context import MAX_ATTRIBUTE_CHARS
from promptrail.integrations._calls import CapturedCall
from tests.provider_clients import openai_answering

MESSAGES = [{"role": "user", "content": "Count to three."}]


def a_call(
    kwargs: dict[str, Any] | None = None,
    call_input: Any = MESSAGES,
    operation: str = "chat",
    provider: str = "openai",
) -> CapturedCall:
    """A call as a provider module makes it, its end kept in a list instead of queued."""
    ended: list[CaptureSpan] = []
    kwargs = {"model": "gpt-4o-mini", "messages": call_input} if kwargs is None else kwargs
    return CapturedCall(provider, operation, kwargs, call_input, list, None, ended.append)


def both_ways(call: CapturedCall) -> tuple[dict[str, Any], dict[str, Any]]:
    """The record built directly, and the one the general attribute path gives."""
    direct = call.to_record()
    general = CaptureSpan.to_record(call)
    return direct, general


def assert_same(call: CapturedCall) -> dict[str, Any]:
    direct, general = both_ways(call)
    assert direct == general
    assert list(direct) == list(general)  # the same keys in the same order: the same JSON
    assert json.dumps(direct) == json.dumps(general)
    return direct


def answered(call: CapturedCall, **fields: Any) -> CapturedCall:
    """``call`` with what a provider module read of its answer, then ended."""
    text = fields.pop("text", ["Hello", ", ", "world."])
    call.text.extend(text)
    for name, value in fields.items():
        setattr(call, name, value)
    call.finish()
    return call


COMPLETE = {
    "model": "gpt-4o-mini-2024-07-18",
    "response_id": "chatcmpl-1",
    "finish_reason": "stop",
    "input_tokens": 12,
    "output_tokens": 3,
}


class Reason(str):
    """A finish reason of a str subclass (an SDK's enum, say)."""


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(COMPLETE, id="complete"),
        pytest.param({}, id="nothing-read"),
        pytest.param({**COMPLETE, "model": None}, id="request-model-only"),
        pytest.param({**COMPLETE, "model": 7}, id="response-model-not-text"),
        pytest.param({**COMPLETE, "finish_reason": None}, id="no-finish-reason"),
        pytest.param({**COMPLETE, "finish_reason": ""}, id="empty-finish-reason"),
        pytest.param({**COMPLETE, "finish_reason": Reason("length")}, id="finish-reason-subclass"),
        pytest.param({**COMPLETE, "finish_reason": 3}, id="finish-reason-not-text"),
        pytest.param({**COMPLETE, "response_id": 42}, id="response-id-not-text"),
        pytest.param({**COMPLETE, "input_tokens": True, "output_tokens": 2.7}, id="odd-counts"),
        pytest.param({**COMPLETE, "input_tokens": -4, "output_tokens": "9"}, id="bad-counts"),
        pytest.param(
            {**COMPLETE, "cached_tokens": 5, "cache_write_tokens": 0, "reasoning_tokens": 2},
            id="usage-details",
        ),
        pytest.param({**COMPLETE, "cached_tokens": 3.0}, id="float-detail"),
        pytest.param({**COMPLETE, "text": []}, id="no-text"),
        pytest.param(
            {**COMPLETE, "text": ["tab\there", " \x00\x1f", " naïve ☃ 🎉", ' "q" \\']},
            id="escapes-and-unicode",
        ),
        pytest.param({**COMPLETE, "text": ["lone \ud800 surrogate"]}, id="lone-surrogate"),
        pytest.param({**COMPLETE, "text": ["x" * MAX_ATTRIBUTE_CHARS]}, id="output-cut"),
        pytest.param(
            {**COMPLETE, "text": ["\x01" * (MAX_ATTRIBUTE_CHARS // 6 + 10)]},
            id="escaped-output-over-the-cap",
        ),
        pytest.param(  # the direct path's longest text of escapes: its JSON within the cap
            {**COMPLETE, "text": ["\x01" * ((MAX_ATTRIBUTE_CHARS - 200) // 6 - 8)]},
            id="escaped-output-under-the-cap",
        ),
    ],
)
def test_the_direct_record_is_the_attribute_paths(fields: dict[str, Any]) -> None:
    call = answered(a_call(), **dict(fields))
    call._first_token_at = call.start_time + 3_000_000
    assert_same(call)


@pytest.mark.parametrize(
    "call_input",
    [
        pytest.param(MESSAGES, id="messages"),
        pytest.param("a prompt as text", id="text"),
        pytest.param('{"looks": "like JSON"}', id="text-that-reads-as-json"),
        pytest.param(None, id="none"),
        pytest.param([{"role": "user", "content": datetime.date(2026, 1, 2)}], id="not-json"),
        pytest.param([{1: "int key"}], id="int-key"),
    ],
)
def test_any_call_input_gives_the_same_record(call_input: Any) -> None:
    call = answered(a_call(call_input=call_input), **COMPLETE)
    assert_same(call)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"messages": MESSAGES}, id="no-model"),
        pytest.param({"model": None, "messages": MESSAGES}, id="model-none"),
        pytest.param({"model": "", "messages": MESSAGES}, id="model-empty"),
    ],
)
def test_a_call_without_a_model_name_gives_the_same_record(kwargs: dict[str, Any]) -> None:
    call = answered(a_call(kwargs), **{**COMPLETE, "model": None})
    assert assert_same(call)["model"] == ""


def test_an_embedding_and_another_provider_give_the_same_record() -> None:
    embedding = a_call({"model": "text-embedding-3-small", "input": "hi"}, "hi", "embeddings")
    assert assert_same(answered(embedding, text=[], input_tokens=2))["kind"] == "embedding"
    anthropic = a_call(provider="anthropic")
    assert assert_same(answered(anthropic, **COMPLETE))["provider"] == "anthropic"


def test_a_failed_call_gives_the_same_record() -> None:
    call = a_call()
    call.text.append("partial")
    call.fail(ConnectionError("stream broke"))
    record = assert_same(call)
    assert (record["status"], record["error"]) == ("error", "ConnectionError: stream broke")


def test_a_call_under_a_parent_with_linkage_gives_the_same_record() -> None:
    call = a_call()
    call.parent_span_id = 0x1234
    call.attributes = {
        _genai.PROMPT_NAME: "greeting",
        _genai.PROMPT_VERSION: 3,
        _genai.INPUT_VARIABLES: json.dumps({"name": "Ada"}),
        _genai.METADATA: json.dumps({"user_id": "u-1"}),
    }
    record = assert_same(answered(call, **COMPLETE))
    assert (record["prompt_name"], record["version"]) == ("greeting", 3)
    assert record["metadata"] == {"user_id": "u-1"}


def test_a_call_with_other_attributes_or_a_description_takes_the_attribute_path() -> None:
    call = a_call()
    call.set_attribute("gen_ai.usage.input_tokens", 99)  # the span's own attribute wins
    record = assert_same(answered(call, **COMPLETE))
    assert record["usage"]["prompt_tokens"] == 12  # the call's reading, described later
    described = a_call()
    described.describe = lambda: ({"promptrail.cost_usd": 0.5}, {})
    answered(described, **COMPLETE)
    assert described.to_record()["usage"]["estimated_cost_usd"] == 0.5


def test_a_plain_calls_record_skips_the_attribute_reading() -> None:
    """What the direct path is for: no attribute dict is built and read back."""
    call = answered(a_call(), **COMPLETE)
    called: list[str] = []

    def note(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            called.append(frame.f_code.co_name)

    sys.setprofile(note)
    try:
        call.to_record()
    finally:
        sys.setprofile(None)
    assert "build_record" not in called
    assert "_describe" not in called


# -- real openai streams, captured by promptrail's own tracer ---------------------------------


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-direct",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


STREAM = (
    _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    + b"".join(_event([{"index": 0, "delta": {"content": f"w{i} "}}]) for i in range(5))
    + _event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
    + _event([], usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14})
    + b"data: [DONE]\n\n"
)


@pytest.fixture
def ended_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CaptureSpan]]:
    """promptrail's own tracer, its ended spans kept here instead of shipped."""
    monkeypatch.setenv("PROMPTRAIL_DISK_CACHE", "0")
    promptrail.init(api_key="pr-test", base_url="http://127.0.0.1:9")
    promptrail.instrument("openai")
    tracer = _runtime.tracer()
    assert type(tracer) is CaptureTracer
    spans: list[CaptureSpan] = []
    monkeypatch.setattr(tracer, "on_end", spans.append)
    try:
        yield spans
    finally:
        promptrail.uninstrument()
        promptrail.shutdown()


Read = Callable[[Any], None]


def read_all(stream: Any) -> None:
    for _ in stream:
        pass


def read_two_then_close(stream: Any) -> None:
    items = iter(stream)
    next(items)
    next(items)
    stream.close()


@pytest.mark.parametrize("read", [read_all, read_two_then_close], ids=["whole", "closed-early"])
def test_a_real_streams_record_is_the_attribute_paths(
    ended_spans: list[CaptureSpan], read: Read
) -> None:
    read(
        openai_answering(STREAM).chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    (span,) = ended_spans
    assert isinstance(span, CapturedCall)
    record = assert_same(span)
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    if read is read_all:
        assert record["output"] == {
            "content": "w0 w1 w2 w3 w4 ",
            "finish_reason": "stop",
            "response_id": "chatcmpl-direct",
        }
        assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (9, 5)
