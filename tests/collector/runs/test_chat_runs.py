"""Runs of chat prompts (docs/api-notes.md, "Chat prompts" and "Runs"): the messages rendered
with Mustache, placeholders spliced, ``user_input`` appended, the tools and answer format sent,
tool calls and finish reasons in the result, the stream's ``end`` and the record.

The provider is the OpenAI wire-format stub on a real socket; the collector talks to it over
HTTP exactly as it would to OpenAI.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.testing import AnthropicStub, OpenAIStub, ToolCallReply
from tests.collector.runs.steps import run, stream

PATH = "/v1/prompts/helper/run"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You help {{user.name}}.{{#vip}} They are a VIP.{{/vip}}"},
    {"type": "placeholder", "name": "history"},
    {"role": "user", "content": [{"type": "text", "text": "About {{topic}}:"}]},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a city up",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
TOOL_CHOICE = "required"
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "strict": True,
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "user": {"type": "object"},
        "vip": {"type": "boolean"},
        "topic": {"type": "string"},
    },
    "required": ["topic", "user"],
}
HISTORY = [
    {"role": "user", "content": "Hi {{topic}}"},  # a history is sent as given, never rendered
    {"role": "assistant", "content": "Hello."},
]
VARIABLES = {"user": {"name": "Ada"}, "vip": True, "topic": "Paris"}
SENT = [
    {"role": "system", "content": "You help Ada. They are a VIP."},
    *HISTORY,
    {"role": "user", "content": [{"type": "text", "text": "About Paris:"}]},
    {"role": "user", "content": "And the weather?"},
]
CALL = ToolCallReply("lookup", {"city": "Paris"}, id="call_42")
CALL_OUT = {"id": "call_42", "name": "lookup", "arguments": '{"city": "Paris"}'}


def create_chat(api: TestClient, **fields: Any) -> None:
    body = {
        "name": "helper",
        "type": "chat",
        "messages": MESSAGES,
        "model": "gpt-4o",
        "parameters": {"temperature": 0.1},
        "tools": TOOLS,
        "tool_choice": TOOL_CHOICE,
        "response_format": RESPONSE_FORMAT,
        "variables_schema": SCHEMA,
        **fields,
    }
    response = api.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text


def record(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def full_body() -> dict[str, Any]:
    return {
        "variables": VARIABLES,
        "placeholders": {"history": HISTORY},
        "user_input": "And the weather?",
    }


def test_a_whole_run_sends_the_rendered_messages_tools_and_format_and_stores_them(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)
    openai_stub.script.reply = '{"text": "Sunny."}'

    result = run(runs_api, PATH, **full_body())

    body = openai_stub.calls[-1].body
    assert body["messages"] == SENT
    assert body["tools"] == TOOLS
    assert body["tool_choice"] == TOOL_CHOICE
    assert body["response_format"] == RESPONSE_FORMAT
    assert (body["model"], body["temperature"]) == ("gpt-4o", 0.1)
    assert result["output"] == '{"text": "Sunny."}'
    assert result["finish_reason"] == "stop"
    assert result["tool_calls"] is None
    stored = record(runs_api, result["id"])
    assert stored["input"] == SENT
    assert stored["output"] == {"content": '{"text": "Sunny."}', "finish_reason": "stop"}
    assert stored["input_variables"] == VARIABLES  # an object and a boolean stay what they were
    assert (stored["prompt_name"], stored["version"]) == ("helper", 1)


def test_a_whole_run_returns_the_models_tool_call_and_the_record_keeps_it(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)
    openai_stub.script.tool_call = CALL

    result = run(runs_api, PATH, **full_body())

    assert result["output"] == ""
    assert result["finish_reason"] == "tool_calls"
    assert result["tool_calls"] == [CALL_OUT]
    assert json.loads(result["tool_calls"][0]["arguments"]) == {"city": "Paris"}
    assert record(runs_api, result["id"])["output"] == {
        "content": "",
        "finish_reason": "tool_calls",
        "tool_calls": [CALL_OUT],
    }


def test_a_stream_relays_the_text_and_its_end_says_why_it_stopped(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)
    openai_stub.script.reply = "Sunny in Paris."

    events = stream(runs_api, PATH, **full_body())

    assert [e["type"] for e in events] == ["start", "chunk", "chunk", "chunk", "end"]
    assert "".join(e["content"] for e in events if e["type"] == "chunk") == "Sunny in Paris."
    end = events[-1]
    assert end["finish_reason"] == "stop"
    assert "tool_calls" not in end
    body = openai_stub.calls[-1].body
    assert (body["messages"], body["tools"], body["stream"]) == (SENT, TOOLS, True)
    assert body["response_format"] == RESPONSE_FORMAT
    stored = record(runs_api, events[0]["request_id"])
    assert stored["output"] == {"content": "Sunny in Paris.", "finish_reason": "stop"}
    assert stored["input"] == SENT


def test_a_stream_puts_the_tool_call_together_in_its_end_and_the_record(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)
    openai_stub.script.tool_call = CALL

    events = stream(runs_api, PATH, **full_body())

    assert [e["type"] for e in events] == ["start", "end"]
    end = events[-1]
    assert (end["finish_reason"], end["tool_calls"]) == ("tool_calls", [CALL_OUT])
    assert end["usage"]["completion_tokens"] > 0
    stored = record(runs_api, events[0]["request_id"])
    assert stored["output"] == {
        "content": "",
        "finish_reason": "tool_calls",
        "tool_calls": [CALL_OUT],
    }


def test_an_empty_list_fills_a_placeholder_and_without_user_input_nothing_is_appended(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api, tools=None, tool_choice=None, response_format=None)

    run(runs_api, PATH, variables=VARIABLES, placeholders={"history": []})

    body = openai_stub.calls[-1].body
    assert body["messages"] == [SENT[0], SENT[3]]
    assert not {"tools", "tool_choice", "response_format"} & set(body)


def refused(response: Any, code: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    return error


@pytest.mark.parametrize("streamed", [False, True])
def test_unfilled_placeholders_are_named_sorted_before_anything_is_sent(
    runs_api: TestClient, openai_stub: OpenAIStub, streamed: bool
) -> None:
    messages = [*MESSAGES, {"type": "placeholder", "name": "examples"}]
    create_chat(runs_api, messages=messages)

    response = runs_api.post(PATH, json={"variables": VARIABLES, "stream": streamed})

    error = refused(response, "INVALID_TEMPLATE")
    assert error["details"]["missing_placeholders"] == ["examples", "history"]
    assert openai_stub.calls == []


def test_missing_variables_are_named_sorted_before_anything_is_sent(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)

    response = runs_api.post(
        PATH, json={"variables": {"vip": False}, "placeholders": {"history": []}}
    )

    error = refused(response, "INVALID_TEMPLATE")
    assert error["details"]["missing_variables"] == ["topic", "user"]
    assert openai_stub.calls == []


def test_a_value_of_the_wrong_type_is_named_before_anything_is_sent(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)
    variables = {**VARIABLES, "vip": "yes"}

    response = runs_api.post(PATH, json={"variables": variables, "placeholders": {"history": []}})

    error = refused(response, "VALIDATION_ERROR")
    assert error["details"]["field"] == "variables.vip"
    assert openai_stub.calls == []


def test_a_placeholder_filled_with_something_not_messages_is_named(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api)

    response = runs_api.post(
        PATH, json={"variables": VARIABLES, "placeholders": {"history": [{"content": "no role"}]}}
    )

    error = refused(response, "VALIDATION_ERROR")
    assert error["details"]["field"] == "placeholders.history.0"
    assert openai_stub.calls == []


def test_a_chat_prompt_for_an_anthropic_model_is_still_refused_clearly(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    create_chat(runs_api, model="claude-3-5-haiku-latest")

    response = runs_api.post(PATH, json={**full_body(), "stream": True})

    error = refused(response, "VALIDATION_ERROR")
    assert error["details"]["field"] == "prompt"
    assert "Anthropic" in error["message"]
    assert anthropic_stub.calls == []
