"""LlamaIndex: dispatcher spans as parents of the openai patch's records, in one trace.

Needs ``llama-index-llms-openai``, which declares ``openai<3`` but works with openai 3.x at
run time: install it with ``pip install --no-deps llama-index-llms-openai`` (docs/sdk.md).

LlamaIndex is imported by the fixtures and tests that use it, not at the module's top: every
test worker collects this module, and importing LlamaIndex there cost each of them seconds of
CPU (docs/architecture.md, "Tests").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import Records

if TYPE_CHECKING:
    from llama_index.core.instrumentation.dispatcher import Dispatcher
    from llama_index.core.llms import ChatResponse
    from llama_index.llms.openai import OpenAI

REPLY = "Hello from the stub provider."


@pytest.fixture
def llm(openai_stub: OpenAIStub) -> OpenAI:
    from llama_index.llms.openai import OpenAI

    return OpenAI(model="gpt-4o", api_key="k", api_base=f"{openai_stub.url}/v1", max_retries=0)


@pytest.fixture
def dispatcher() -> Dispatcher:
    """This module's LlamaIndex dispatcher, whose spans the tests' own functions open."""
    from llama_index.core.instrumentation import get_dispatcher

    return get_dispatcher(__name__)


def named(recorded: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = (r for r in recorded if r["span_name"].rsplit(".", 1)[-1] == name)
    return found


def test_dispatcher_spans_are_parents_of_one_record_per_provider_call(
    llm: OpenAI, dispatcher: Dispatcher, openai_stub: OpenAIStub, records: Records
) -> None:
    from llama_index.core.llms import ChatMessage

    @dispatcher.span
    def answer(question: str) -> str:
        return str(llm.chat([ChatMessage(role="user", content=question)]).message.content)

    with promptrail.context(user_id="u1"):
        assert answer("Hi?") == REPLY

    recorded = records(expected=3)
    assert len(openai_stub.calls) == 1
    calls = [r for r in recorded if r["model"]]
    assert len(calls) == 1
    call, chat, outer = calls[0], named(recorded, "chat"), named(recorded, "answer")
    assert {r["trace_id"] for r in recorded} == {outer["trace_id"]}
    assert outer["parent_span_id"] is None
    assert chat["parent_span_id"] == outer["span_id"]
    assert call["parent_span_id"] == chat["span_id"]
    assert call["input"] == [{"role": "user", "content": "Hi?"}]
    assert call["output"]["content"] == REPLY
    assert outer["input_variables"] == {"question": "Hi?"}
    assert all(r["metadata"] == {"user_id": "u1"} for r in recorded)
    assert (outer["kind"], chat["kind"], call["kind"]) == ("span", "span", "llm")


def test_async_calls_and_errors(llm: OpenAI, openai_stub: OpenAIStub, records: Records) -> None:
    async def ask() -> str:
        try:
            return str((await llm.acomplete("async?")).text)
        finally:
            await llm._get_aclient().close()  # its connections belong to this event loop

    assert asyncio.run(ask()) == REPLY
    openai_stub.script.failures = [500]
    with pytest.raises(Exception, match="500"):
        llm.complete("doomed")

    recorded = records(expected=4)
    spans = {r["span_name"]: r for r in recorded if not r["model"]}
    calls = {r["input"][0]["content"]: r for r in recorded if r["model"]}
    assert calls["async?"]["parent_span_id"] == spans["OpenAI.acomplete"]["span_id"]
    assert calls["doomed"]["status"] == spans["OpenAI.complete"]["status"] == "error"
    assert calls["doomed"]["parent_span_id"] == spans["OpenAI.complete"]["span_id"]


def streamed_call(recorded: list[dict[str, Any]], span_name: str) -> dict[str, Any]:
    """The one provider record, checked to be a child of ``span_name``'s span in its trace."""
    (call,) = (r for r in recorded if r["model"])
    span = named(recorded, span_name)
    assert call["parent_span_id"] == span["span_id"]
    assert call["trace_id"] == span["trace_id"]
    return call


def test_streamed_calls_nest_under_their_span(
    llm: OpenAI, dispatcher: Dispatcher, openai_stub: OpenAIStub, records: Records
) -> None:
    from llama_index.core.llms import ChatMessage

    @dispatcher.span
    def ask(question: str) -> Iterator[ChatResponse]:
        return llm.stream_chat([ChatMessage(role="user", content=question)])

    chunks = ask("stream?")
    # Work done between the call and the first chunk is not the stream's.
    llm.complete("between")
    assert "".join(chunk.delta or "" for chunk in chunks) == REPLY

    recorded = records(expected=5)
    assert len(openai_stub.calls) == 2
    calls = {r["input"][0]["content"]: r for r in recorded if r["model"]}
    assert calls.keys() == {"stream?", "between"}
    stream, outer = named(recorded, "stream_chat"), named(recorded, "ask")
    assert calls["stream?"]["parent_span_id"] == stream["span_id"]
    assert stream["parent_span_id"] == outer["span_id"]
    assert calls["stream?"]["trace_id"] == stream["trace_id"] == outer["trace_id"]
    assert calls["stream?"]["output"]["content"] == REPLY
    assert calls["between"]["parent_span_id"] == named(recorded, "complete")["span_id"]
    assert calls["between"]["trace_id"] != outer["trace_id"]


def test_streamed_completion_nests_under_its_span(llm: OpenAI, records: Records) -> None:
    chunks = llm.stream_complete("complete?")
    assert "".join(chunk.delta or "" for chunk in chunks) == REPLY
    recorded = records(expected=2)
    assert streamed_call(recorded, "stream_complete")["output"]["content"] == REPLY


def test_async_streamed_calls_nest_under_their_span(
    llm: OpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
    from llama_index.core.llms import ChatMessage

    async def stream() -> str:
        try:
            chunks = await llm.astream_chat([ChatMessage(role="user", content="astream?")])
            return "".join([chunk.delta or "" async for chunk in chunks])
        finally:
            await llm._get_aclient().close()  # its connections belong to this event loop

    assert asyncio.run(stream()) == REPLY
    recorded = records(expected=2)
    assert len(openai_stub.calls) == 1
    call = streamed_call(recorded, "astream_chat")
    assert call["input"] == [{"role": "user", "content": "astream?"}]
    assert call["output"]["content"] == REPLY
