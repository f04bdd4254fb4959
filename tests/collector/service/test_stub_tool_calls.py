"""The provider stubs answer with a tool call when their script asks (``Script.tool_call``),
in each wire format, whole and streamed: the official SDKs read the call as they would the
provider's. The chat-run tests (tests/collector/runs/test_chat_runs.py) rely on this.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from promptrail.testing import AnthropicStub, OpenAIStub, Replies, ToolCallReply

CALL = ToolCallReply("lookup", {"city": "Paris", "days": 3}, id="call_7")
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
    }
]


def openai_client(stub: OpenAIStub) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stub.url}/v1", api_key="sk-sdk", max_retries=0)


def test_openai_sdk_reads_a_whole_tool_call(openai_stub: OpenAIStub) -> None:
    openai_stub.script.tool_call = CALL

    with openai_client(openai_stub) as client:
        completion = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=TOOLS,
        )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.id, c.type) for c in calls] == [("call_7", "function")]
    function = calls[0].function  # type: ignore[union-attr]
    assert function.name == "lookup"
    assert json.loads(function.arguments) == {"city": "Paris", "days": 3}


def test_openai_sdk_puts_a_streamed_tool_call_together(openai_stub: OpenAIStub) -> None:
    openai_stub.script.tool_call = CALL

    with openai_client(openai_stub) as client:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    ids, names, arguments = [], [], ""
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                ids += [delta.id] if delta.id else []
                if delta.function and delta.function.name:
                    names.append(delta.function.name)
                arguments += (delta.function.arguments or "") if delta.function else ""
    assert (ids, names) == (["call_7"], ["lookup"])
    assert json.loads(arguments) == {"city": "Paris", "days": 3}
    reasons = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert reasons == ["tool_calls"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert openai_stub.streams_completed == 1


def anthropic_client(stub: AnthropicStub) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stub.url, api_key="sk-ant-sdk", max_retries=0)


ANTHROPIC_TOOLS: list[Any] = [{"name": "lookup", "input_schema": {"type": "object"}}]


def test_anthropic_sdk_reads_a_whole_tool_use(anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.script.tool_call = CALL

    with anthropic_client(anthropic_stub) as client:
        message = client.messages.create(
            model="claude-3-5-haiku-latest",
            max_tokens=100,
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=ANTHROPIC_TOOLS,
        )

    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("call_7", "lookup", {"city": "Paris", "days": 3})


def test_anthropic_sdk_puts_a_streamed_tool_use_together(anthropic_stub: AnthropicStub) -> None:
    anthropic_stub.script.tool_call = CALL

    with (
        anthropic_client(anthropic_stub) as client,
        client.messages.stream(
            model="claude-3-5-haiku-latest",
            max_tokens=100,
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            tools=ANTHROPIC_TOOLS,
        ) as stream,
    ):
        pieces = [e.partial_json for e in stream if e.type == "input_json"]
        message = stream.get_final_message()

    assert len(pieces) > 1  # the input arrived in pieces
    assert json.loads("".join(pieces)) == {"city": "Paris", "days": 3}
    assert message.stop_reason == "tool_use"
    [block] = message.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("call_7", "lookup", {"city": "Paris", "days": 3})
    assert message.usage.output_tokens > 0
    assert anthropic_stub.streams_completed == 1


RULES = [
    {"match": "weather", "tool_call": {"name": "lookup", "arguments": {"city": "Oslo"}}},
    {"match": "hello", "reply": "Hi there."},
]


def test_a_replies_rule_answers_with_a_tool_call_in_both_wire_formats(
    openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    openai_stub.script.replies = Replies.from_json(RULES)
    anthropic_stub.script.replies = Replies.from_json(RULES)

    with openai_client(openai_stub) as client:
        called = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather in Oslo?"}]
        )
        greeted = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}]
        )
    with (
        anthropic_client(anthropic_stub) as claude,
        claude.messages.stream(
            model="claude-3-5-haiku-latest",
            max_tokens=100,
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
        ) as stream,
    ):
        message = stream.get_final_message()

    [call] = called.choices[0].message.tool_calls or []
    assert call.function.name == "lookup"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Oslo"}  # type: ignore[union-attr]
    assert called.choices[0].finish_reason == "tool_calls"
    assert greeted.choices[0].message.content == "Hi there."
    [block] = message.content
    assert block.type == "tool_use" and block.input == {"city": "Oslo"}
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ({"reply": "x", "tool_call": {"name": "f"}}, "reply and tool_call"),
        ({"tool_call": {"arguments": {}}}, "tool_call needs a name"),
        ({"tool_call": {"name": "f", "arguments": [1]}}, "arguments is a JSON object"),
        ({"tool_call": {"name": "f", "args": {}}}, "tool_call is"),
    ],
)
def test_a_bad_tool_call_rule_is_refused_saying_why(rule: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Replies.from_json([rule])
