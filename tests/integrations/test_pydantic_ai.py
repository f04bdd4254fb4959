"""pydantic-ai: agent and tool spans as parents of the openai patch's records, in one trace.

pydantic-ai and openai are imported by the tests that use them, not at the module's top: every
test worker collects this module, and a worker that runs neither test would pay for them
(docs/architecture.md, "Tests").
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import promptrail
from promptrail.testing import OpenAIStub
from tests.capture import Records

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo

REPLY = "Hello from the stub provider."


def test_an_agent_run_is_the_parent_of_one_record_per_provider_call(
    openai_stub: OpenAIStub, records: Records
) -> None:
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def run() -> str:
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)
        try:
            model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, name="greeter")
            async with promptrail.context(user_id="u1"):
                return (await agent.run("Hi?")).output
        finally:
            await client.close()

    assert asyncio.run(run()) == REPLY

    recorded = records(expected=2)
    assert len(openai_stub.calls) == 1
    (call,) = (r for r in recorded if r["model"])  # pydantic-ai's own chat span: not a copy
    (agent,) = (r for r in recorded if not r["model"])
    assert agent["span_name"] == "invoke_agent greeter"
    assert agent["parent_span_id"] is None
    assert (call["trace_id"], call["parent_span_id"]) == (agent["trace_id"], agent["span_id"])
    usage = agent["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (0, 0)  # not counted twice
    assert agent["output"]["content"] == REPLY
    assert call["output"]["content"] == REPLY
    assert all(r["metadata"] == {"user_id": "u1"} for r in recorded)
    assert (agent["kind"], call["kind"]) == ("agent", "llm")


def test_a_tool_call_is_a_record_under_its_agent_run(records: Records) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("lookup", {"topic": "otters"})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(plan), name="researcher")

    @agent.tool_plain
    def lookup(topic: str) -> str:
        return f"facts about {topic}"

    # (run_sync would leave an event loop of pydantic-ai's open for the rest of the session)
    assert asyncio.run(agent.run("Research otters")).output == "done"

    spans: dict[str, dict[str, Any]] = {r["span_name"]: r for r in records(expected=2)}
    tool, run = spans["execute_tool lookup"], spans["invoke_agent researcher"]
    assert tool["parent_span_id"] == run["span_id"]
    assert tool["input_variables"] == {"topic": "otters"}
    assert tool["output"]["content"] == "facts about otters"
    assert (tool["kind"], run["kind"]) == ("tool", "agent")
    assert not any(r["model"] for r in spans.values())  # no provider call: no model record
