"""The real ``openai`` SDK, patched, against a wire-format stub: every call becomes a record."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import wrapt
from openai.resources.chat.completions import Completions
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import Records, fetch_records
from tests.keys import DEFAULT_KEY
from tests.openllmetry import openllmetry_instrumented
from tests.provider_clients import openai_client

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello to the tester"},
]


def aclient(stub: OpenAIStub) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="sk-test", base_url=f"{stub.url}/v1", max_retries=0)


def test_chat_completion_is_recorded(openai_stub: OpenAIStub, records: Records) -> None:
    openai_stub.reset()

    completion = openai_client(openai_stub).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, temperature=0.2
    )

    (record,) = records()
    assert completion.choices[0].message.content == openai_stub.script.reply
    assert record["model"] == completion.model
    assert record["provider"] == "openai"
    assert record["status"] == "success"
    assert record["input"] == MESSAGES
    assert record["output"]["content"] == openai_stub.script.reply
    assert record["output"]["finish_reason"] == "stop"
    assert record["usage"]["prompt_tokens"] == completion.usage.prompt_tokens  # type: ignore[union-attr]
    assert record["usage"]["completion_tokens"] == completion.usage.completion_tokens  # type: ignore[union-attr]
    assert record["id"] == f"req_{record['trace_id']}{record['span_id']}"
    assert record["kind"] == "llm"


def test_a_queued_call_does_not_keep_the_response_object_alive(
    openai_stub: OpenAIStub, live_url: str
) -> None:
    # The shipper waits (long interval, below a full batch): the span sits in the queue while
    # the application drops its response. What the queue's budget counts per span assumes
    # the SDK's object tree is not held there (docs/sdk.md, "Shipping and its safety valves").
    openai_stub.reset()
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=60)
    promptrail.instrument("openai")
    try:
        completion = openai_client(openai_stub).chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES
        )
        held = weakref.ref(completion)
        reply = completion.choices[0].message.content
        del completion
        gc.collect()

        assert promptrail.stats()["queued"] == 1
        assert held() is None
        (record,) = fetch_records(live_url)
        assert record["output"]["content"] == reply
        assert record["usage"]["prompt_tokens"] > 0
    finally:
        promptrail.uninstrument()
        promptrail.shutdown()


@pytest.mark.parametrize(
    "how", ["exhausted", "context", "closed_early", "collected", "loop_left_early"]
)
def test_streams_stay_streams_and_are_recorded_however_they_end(
    openai_stub: OpenAIStub, records: Records, how: str
) -> None:
    openai_stub.reset()
    openai_stub.script.reply = "one two three four five"
    stream = openai_client(openai_stub).chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert isinstance(stream, openai.Stream)
    pieces: list[str] = []
    if how == "exhausted":
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    elif how == "context":
        with stream as entered:
            pieces = [c.choices[0].delta.content or "" for c in entered if c.choices]
    elif how == "loop_left_early":
        for chunk in stream:
            pieces.append(chunk.choices[0].delta.content or "")
            if len(pieces) == 2:
                break
        del stream, chunk
        gc.collect()
    elif how == "closed_early":
        pieces = [next(stream).choices[0].delta.content or "" for _ in range(2)]
        stream.close()
    else:
        pieces = [next(stream).choices[0].delta.content or "" for _ in range(2)]
        del stream
        gc.collect()

    (record,) = records()
    assert record["output"]["content"] == "".join(pieces)
    assert record["time_to_first_token_ms"] is not None
    if how in ("exhausted", "context"):
        assert "".join(pieces) == "one two three four five"
        assert record["usage"]["completion_tokens"] > 0


def test_async_chat_and_async_stream(openai_stub: OpenAIStub, records: Records) -> None:
    openai_stub.reset()

    async def run() -> str:
        async with aclient(openai_stub) as api:
            await api.chat.completions.create(model="gpt-4o", messages=MESSAGES)
            stream = await api.chat.completions.create(
                model="gpt-4o", messages=MESSAGES, stream=True
            )
            assert isinstance(stream, openai.AsyncStream)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    streamed = asyncio.run(run())

    recorded = records(expected=2)
    assert sorted(r["output"]["content"] for r in recorded) == sorted(
        [openai_stub.script.reply, streamed]
    )


def test_provider_errors_are_recorded_and_reraised_unchanged(
    openai_stub: OpenAIStub, records: Records
) -> None:
    openai_stub.reset()
    openai_stub.script.failures = [500]

    with pytest.raises(openai.InternalServerError) as raised:
        openai_client(openai_stub).chat.completions.create(model="gpt-4o", messages=MESSAGES)

    (record,) = records()
    assert raised.value.status_code == 500
    assert record["status"] == "error"
    assert "InternalServerError" in record["error"]


def test_with_raw_response_keeps_working(openai_stub: OpenAIStub, records: Records) -> None:
    openai_stub.reset()

    raw = openai_client(openai_stub).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=MESSAGES
    )

    completion = raw.parse()
    assert raw.headers.get("content-type", "").startswith("application/json")
    (record,) = records()
    assert record["output"]["content"] == completion.choices[0].message.content


def test_instrument_is_idempotent_and_uninstrument_restores(
    openai_stub: OpenAIStub, records: Records
) -> None:
    openai_stub.reset()
    promptrail.instrument("openai")
    promptrail.instrument("openai")

    openai_client(openai_stub).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert len(records()) == 1

    promptrail.uninstrument("openai")
    openai_client(openai_stub).chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert len(records(expected=2, timeout=1.0)) == 1


def test_a_call_sending_a_rendered_template_is_linked_to_its_version(
    openai_stub: OpenAIStub, records: Records, capture: str
) -> None:
    openai_stub.reset()
    with promptrail.Client(api_key=DEFAULT_KEY, base_url=capture) as rest:
        rest.prompts.create(name="greeting", template="Greet {who} warmly", model="gpt-4o")
        rest.prompts.update("greeting", template="Greet {who} very warmly")
        template = rest.prompts.template("greeting")
    text = template.render(who="Ada")

    openai_client(openai_stub).chat.completions.create(
        model=template.model, messages=[{"role": "user", "content": text}]
    )

    (record,) = records()
    assert text == "Greet Ada very warmly"
    assert (record["prompt_name"], record["version"]) == ("greeting", 2)
    assert record["input_variables"] == {"who": "Ada"}


@pytest.fixture
def openllmetry() -> Iterator[InMemorySpanExporter]:
    """OpenLLMetry's own OpenAI instrumentation, active, with its spans kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with openllmetry_instrumented(provider):
        yield exporter
    provider.shutdown()


# The instrumentation's first use trips a pydantic deprecation warning in its own code.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_another_instrumentation_of_the_same_method_neither_stops_nor_loses_capture(
    openllmetry: InMemorySpanExporter, openai_stub: OpenAIStub, records: Records
) -> None:
    # OpenLLMetry wrapped Completions.create first (its wrapper stays even after its own
    # uninstrument): promptrail wraps it in turn instead of taking it for its own.
    openai_stub.reset()
    completion = openai_client(openai_stub).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES
    )

    (record,) = records()
    assert record["output"]["content"] == completion.choices[0].message.content
    assert len(openllmetry.get_finished_spans()) == 1

    promptrail.uninstrument()
    create = vars(Completions)["create"]
    assert isinstance(create, wrapt.FunctionWrapper)  # OpenLLMetry's, left in place
    openai_client(openai_stub).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert len(openllmetry.get_finished_spans()) == 2
    assert len(records()) == 1  # promptrail no longer records


def test_uninstrument_unlinks_its_wrapper_from_under_a_later_one(
    openai_stub: OpenAIStub, records: Records
) -> None:
    calls: list[str] = []

    def later(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append("later")
        return wrapped(*args, **kwargs)

    original = vars(Completions)["create"]
    wrapt.wrap_function_wrapper(Completions, "create", later)  # on top of promptrail's
    try:
        promptrail.uninstrument()
        openai_client(openai_stub).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)

        assert calls == ["later"]
        assert records(expected=0, timeout=0.5) == []
        promptrail.instrument()  # and back, once
        openai_client(openai_stub).chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        assert len(records()) == 1
    finally:
        promptrail.uninstrument()
        Completions.create = original
