"""LlamaIndex: dispatcher spans as parents of the openai patch's records, in one trace.

Needs ``llama-index-llms-openai``, which declares ``openai<3`` but works with openai 3.x at
run time: install it with ``pip install --no-deps llama-index-llms-openai`` (docs/sdk.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI

import promptrail
from tests.integrations.conftest import Records
from tests.stubs.openai_stub import OpenAIStub

REPLY = "Hello from the stub provider."
dispatcher = get_dispatcher(__name__)


@pytest.fixture
def llm(openai_stub: OpenAIStub) -> OpenAI:
    return OpenAI(model="gpt-4o", api_key="k", api_base=f"{openai_stub.url}/v1", max_retries=0)


def named(recorded: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = (r for r in recorded if r["span_name"].rsplit(".", 1)[-1] == name)
    return found


def test_dispatcher_spans_are_parents_of_one_record_per_provider_call(
    llm: OpenAI, openai_stub: OpenAIStub, records: Records
) -> None:
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
