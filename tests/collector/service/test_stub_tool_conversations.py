"""``promptrail stub-provider`` plays a model that calls tools with no rule written: a request
offering tools gets a call of one (arguments made from its schema), the conversation sent back
with the tool's result gets a final text, and a JSON-schema answer is JSON of that schema; in
both wire formats, whole and streamed, read by the official openai and anthropic SDKs. The
example examples/chat_tools.py, run by ``make examples``, relies on this.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import jsonschema  # type: ignore[import-untyped]
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from promptrail.testing import ECHO_PREFIX, AnthropicStub, OpenAIStub, Replies

QUESTION = "What should I wear in Paris today?"
PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}
OPENAI_TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]
ANSWER = {
    "type": "object",
    "properties": {"advice": {"type": "string"}, "warm": {"type": "boolean"}},
    "required": ["advice", "warm"],
}
RESPONSE_FORMAT: Any = {"type": "json_schema", "json_schema": {"name": "advice", "schema": ANSWER}}
WEATHER = '{"temperature_c": 12, "sky": "rain"}'


def openai_client(stub: OpenAIStub) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stub.url}/v1", api_key="sk-sdk", max_retries=0)


def anthropic_client(stub: AnthropicStub) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=stub.url, api_key="sk-ant-sdk", max_retries=0)


def openai_turn(client: openai.OpenAI, stream: bool, **kwargs: Any) -> dict[str, Any]:
    """One call, whole or streamed, read back as {content, finish_reason, tool_calls}."""
    if not stream:
        choice = client.chat.completions.create(model="gpt-4o-mini", **kwargs).choices[0]
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}  # type: ignore[union-attr]
            for c in choice.message.tool_calls or []
        ]
        return {"content": choice.message.content, "finish": choice.finish_reason, "calls": calls}
    content, finish, calls = "", None, {}
    for chunk in client.chat.completions.create(model="gpt-4o-mini", stream=True, **kwargs):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                if delta.function:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
    return {"content": content or None, "finish": finish, "calls": list(calls.values())}


@pytest.fixture
def openai_echo(openai_stub: OpenAIStub) -> OpenAIStub:
    openai_stub.script.replies = Replies()  # as promptrail stub-provider answers
    return openai_stub


@pytest.fixture
def anthropic_echo(anthropic_stub: AnthropicStub) -> AnthropicStub:
    anthropic_stub.script.replies = Replies()
    return anthropic_stub


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_tool_loop_calls_a_tool_then_answers_json_of_the_schema(
    openai_echo: OpenAIStub, stream: bool
) -> None:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]
    with openai_client(openai_echo) as client:
        first = openai_turn(
            client, stream, messages=messages, tools=OPENAI_TOOLS, response_format=RESPONSE_FORMAT
        )
        [call] = first["calls"]
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call["id"], "content": WEATHER},
        ]
        final = openai_turn(
            client, stream, messages=messages, tools=OPENAI_TOOLS, response_format=RESPONSE_FORMAT
        )

    assert first["finish"] == "tool_calls" and first["content"] is None
    assert call["name"] == "get_weather"  # the first tool offered
    arguments = json.loads(call["arguments"])
    assert arguments == {"city": f"{ECHO_PREFIX}{QUESTION}", "unit": "celsius", "days": 1}
    assert final["finish"] == "stop" and final["calls"] == []
    # The answer follows the schema and says what the tool returned.
    assert json.loads(final["content"]) == {"advice": f"{ECHO_PREFIX}{WEATHER}", "warm": True}


def test_openai_tool_choice_none_or_no_tools_answers_text(openai_echo: OpenAIStub) -> None:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]
    with openai_client(openai_echo) as client:
        declined = openai_turn(
            client, False, messages=messages, tools=OPENAI_TOOLS, tool_choice="none"
        )
        plain = openai_turn(client, False, messages=messages)
        forced = openai_turn(
            client,
            False,
            messages=messages,
            tools=OPENAI_TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_time"}},
        )

    assert (
        declined == plain == {"content": f"{ECHO_PREFIX}{QUESTION}", "finish": "stop", "calls": []}
    )
    assert [(c["name"], json.loads(c["arguments"])) for c in forced["calls"]] == [("get_time", {})]


def test_a_tool_call_rule_is_not_called_again_once_its_result_is_back(
    openai_stub: OpenAIStub,
) -> None:
    openai_stub.script.replies = Replies.from_json(
        [{"match": "Paris", "tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    )
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]
    with openai_client(openai_stub) as client:
        first = openai_turn(client, False, messages=messages, tools=OPENAI_TOOLS)
        messages += [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": first["calls"][0]["id"],
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": first["calls"][0]["id"], "content": WEATHER},
        ]
        final = openai_turn(client, False, messages=messages, tools=OPENAI_TOOLS)

    assert json.loads(first["calls"][0]["arguments"]) == {"city": "Paris"}
    assert final == {"content": f"{ECHO_PREFIX}{WEATHER}", "finish": "stop", "calls": []}


ANTHROPIC_TOOLS: list[Any] = [
    {"name": "get_weather", "input_schema": PARAMETERS},
    {"name": "get_time", "input_schema": {"type": "object"}},
]


def anthropic_turn(
    client: anthropic.Anthropic, stream: bool, **kwargs: Any
) -> anthropic.types.Message:
    arguments: dict[str, Any] = {"model": "claude-3-5-haiku-latest", "max_tokens": 200, **kwargs}
    if not stream:
        return client.messages.create(**arguments)
    with client.messages.stream(**arguments) as events:
        return events.get_final_message()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_tool_loop_calls_a_tool_then_answers_text(
    anthropic_echo: AnthropicStub, stream: bool
) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    with anthropic_client(anthropic_echo) as client:
        first = anthropic_turn(client, stream, messages=messages, tools=ANTHROPIC_TOOLS)
        [use] = first.content
        assert use.type == "tool_use"
        messages += [
            {"role": "assistant", "content": [use.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": WEATHER}],
            },
        ]
        final = anthropic_turn(client, stream, messages=messages, tools=ANTHROPIC_TOOLS)

    assert first.stop_reason == "tool_use"
    assert use.name == "get_weather"
    assert use.input == {"city": f"{ECHO_PREFIX}{QUESTION}", "unit": "celsius", "days": 1}
    assert final.stop_reason == "end_turn"
    assert [(b.type, getattr(b, "text", None)) for b in final.content] == [
        ("text", f"{ECHO_PREFIX}{WEATHER}")
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_anthropic_forced_answer_tool_is_called_with_an_instance_of_its_schema(
    anthropic_echo: AnthropicStub, stream: bool
) -> None:
    # What anthropic_kwargs send for a JSON-schema answer: a tool forced by tool_choice.
    tools = [*ANTHROPIC_TOOLS, {"name": "advice", "input_schema": ANSWER}]
    with anthropic_client(anthropic_echo) as client:
        message = anthropic_turn(
            client,
            stream,
            messages=[{"role": "user", "content": QUESTION}],
            tools=tools,
            tool_choice={"type": "tool", "name": "advice"},
        )

    [use] = message.content
    assert use.type == "tool_use" and use.name == "advice"
    assert use.input == {"advice": f"{ECHO_PREFIX}{QUESTION}", "warm": True}
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {
            "type": "object",
            "properties": {
                "stops": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "city": {"type": "string"},
                            "nights": {"type": "integer", "minimum": 1},
                        },
                    },
                },
                "budget": {"type": ["null", "number"]},
                "mode": {"anyOf": [{"const": "train"}, {"const": "plane"}]},
                "confirmed": {"type": "boolean"},
            },
            "required": ["stops", "budget", "mode", "confirmed"],
        },
    ],
    ids=["empty", "nested"],
)
def test_the_arguments_of_a_stub_tool_call_are_valid_for_the_tools_schema(
    openai_echo: OpenAIStub, schema: dict[str, Any]
) -> None:
    tool: Any = {"type": "function", "function": {"name": "plan", "parameters": schema}}
    with openai_client(openai_echo) as client:
        turn = openai_turn(
            client, False, messages=[{"role": "user", "content": QUESTION}], tools=[tool]
        )

    [call] = turn["calls"]
    arguments = json.loads(call["arguments"])
    jsonschema.validate(arguments, schema)
    assert isinstance(arguments, dict)
