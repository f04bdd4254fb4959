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
from tests.collector.experiments.steps import finished, post, results
from tests.collector.runs.steps import run, stream

PATH = "/v1/prompts/helper/run"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You help {{user.name}}.{{#vip}} They are a VIP.{{/vip}}"},
    {"type": "placeholder", "name": "history"},
    {"role": "user", "content": [{"type": "text", "text": "About {{topic}}:"}]},
]
TOOLS: list[dict[str, Any]] = [
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
RESPONSE_FORMAT: dict[str, Any] = {
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


def test_without_a_schema_a_plain_variable_takes_text_only(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_chat(runs_api, variables_schema=None)
    body = {"variables": {**VARIABLES, "topic": 3}, "placeholders": {"history": []}}

    error = refused(runs_api.post(PATH, json=body), "VALIDATION_ERROR")

    assert error["details"]["field"] == "variables.topic"
    assert openai_stub.calls == []
    # A section's and a dotted name's values may be anything.
    body = {"variables": VARIABLES, "placeholders": {"history": []}}
    assert runs_api.post(PATH, json=body).status_code == 200


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


# -- Anthropic: the same prompt converted (docs/api-notes.md, "Chat prompts") ----------------

CLAUDE = "claude-3-5-haiku-latest"
SENT_TO_ANTHROPIC = [
    {"role": "user", "content": [{"type": "text", "text": "Hi {{topic}}"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
    {"role": "user", "content": [{"type": "text", "text": "About Paris:"}]},
    {"role": "user", "content": [{"type": "text", "text": "And the weather?"}]},
]
LOOKUP_TOOL = {
    "name": "lookup",
    "input_schema": TOOLS[0]["function"]["parameters"],
    "description": "Look a city up",
}
ANSWER_TOOL = {
    "name": "answer",
    "description": "Answer with this tool: its input is the answer.",
    "input_schema": RESPONSE_FORMAT["json_schema"]["schema"],
}


@pytest.mark.parametrize("streamed", [False, True])
def test_an_anthropic_run_sends_the_converted_request_and_the_forced_answer_is_the_output(
    runs_api: TestClient, anthropic_stub: AnthropicStub, streamed: bool
) -> None:
    create_chat(runs_api, model=CLAUDE)
    anthropic_stub.script.tool_call = ToolCallReply("answer", {"text": "Sunny."})

    if streamed:
        events = stream(runs_api, PATH, **full_body())
        output = "".join(e["content"] for e in events if e["type"] == "chunk")
        end, request_id = events[-1], events[0]["request_id"]
        assert end["type"] == "end" and "tool_calls" not in end
    else:
        end = run(runs_api, PATH, **full_body())
        output, request_id = end["output"], end["id"]
        assert end["tool_calls"] is None

    assert output == '{"text": "Sunny."}'
    assert end["finish_reason"] == "stop"
    body = anthropic_stub.calls[-1].body
    assert body["system"] == "You help Ada. They are a VIP."
    assert body["messages"] == SENT_TO_ANTHROPIC
    assert body["tools"] == [LOOKUP_TOOL, ANSWER_TOOL]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert (body["model"], body["temperature"], body["max_tokens"]) == (CLAUDE, 0.1, 1024)
    stored = record(runs_api, request_id)
    assert stored["input"] == SENT  # the messages as the prompt wrote them, rendered
    assert stored["output"] == {"content": '{"text": "Sunny."}', "finish_reason": "stop"}


@pytest.mark.parametrize("streamed", [False, True])
def test_an_anthropic_tool_call_is_returned_with_openais_finish_reason(
    runs_api: TestClient, anthropic_stub: AnthropicStub, streamed: bool
) -> None:
    create_chat(runs_api, model=CLAUDE, response_format=None)
    anthropic_stub.script.tool_call = CALL

    if streamed:
        events = stream(runs_api, PATH, **full_body())
        assert [e["type"] for e in events] == ["start", "end"]
        end, request_id = events[-1], events[0]["request_id"]
    else:
        end = run(runs_api, PATH, **full_body())
        request_id = end["id"]
        assert end["output"] == ""

    assert (end["finish_reason"], end["tool_calls"]) == ("tool_calls", [CALL_OUT])
    assert anthropic_stub.calls[-1].body["tool_choice"] == {"type": "any"}
    assert record(runs_api, request_id)["output"] == {
        "content": "",
        "finish_reason": "tool_calls",
        "tool_calls": [CALL_OUT],
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "lookup"}}, {"type": "tool", "name": "lookup"}),
    ],
)
def test_an_anthropic_run_maps_the_tool_choice_and_end_turn_is_stop(
    runs_api: TestClient, anthropic_stub: AnthropicStub, choice: Any, sent: dict[str, Any]
) -> None:
    create_chat(runs_api, model=CLAUDE, response_format=None, tool_choice=choice)
    anthropic_stub.script.reply = "Sunny."

    result = run(runs_api, PATH, **full_body())

    assert (result["output"], result["finish_reason"]) == ("Sunny.", "stop")
    body = anthropic_stub.calls[-1].body
    assert (body["tool_choice"], body["tools"]) == (sent, [LOOKUP_TOOL])


def test_an_anthropic_run_turns_tool_messages_and_images_into_its_blocks(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in {{what}}?"},
                {"type": "image_url", "image_url": {"url": "https://x.test/{{what}}.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Rainy"},
    ]
    create_chat(
        runs_api,
        model=CLAUDE,
        messages=messages,
        variables_schema=None,
        tool_choice=None,
        response_format=None,
    )

    run(runs_api, PATH, variables={"what": "cat"})

    body = anthropic_stub.calls[-1].body
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in cat?"},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/cat.png"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"city": "Oslo"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Rainy"}],
        },
    ]
    assert "tool_choice" not in body


# -- experiments on the service run chat prompts through the same path ----------------------


def test_an_experiment_runs_a_chat_prompt_and_an_unfillable_placeholder_is_a_clear_error(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    simple = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "{{topic}}"}]
    create_chat(runs_api, messages=simple, tools=None, tool_choice=None, response_format=None)
    post(runs_api, "/v1/prompts", {"name": "with-history", "type": "chat", "messages": MESSAGES,
                                   "model": "gpt-4o"})  # fmt: skip
    post(runs_api, "/v1/datasets", {"name": "topics"})
    variables = {"topic": "Paris", "user": {"name": "Ada"}, "vip": False}
    items = [{"id": "p", "input_variables": variables}]
    post(runs_api, "/v1/datasets/topics/items", {"items": items})

    ran = post(runs_api, "/v1/experiments", {"dataset": "topics", "prompt": "helper"})
    assert finished(runs_api, ran["id"])["status"] == "completed"
    [result] = results(runs_api, ran["id"])
    assert result["status"] == "success", result
    assert openai_stub.calls[-1].body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris"},
    ]

    calls = len(openai_stub.calls)
    refused_run = post(runs_api, "/v1/experiments", {"dataset": "topics", "prompt": "with-history"})
    finished(runs_api, refused_run["id"])
    [result] = results(runs_api, refused_run["id"])
    assert result["status"] == "error"
    assert "history" in result["error"]  # the placeholder an item cannot fill, named
    assert len(openai_stub.calls) == calls  # nothing was sent for it


@pytest.mark.parametrize("model", ["gpt-4o", CLAUDE])
@pytest.mark.parametrize("streamed", [False, True])
def test_an_answer_cut_at_the_token_limit_finishes_with_length(
    runs_api: TestClient,
    openai_stub: OpenAIStub,
    anthropic_stub: AnthropicStub,
    model: str,
    streamed: bool,
) -> None:
    create_chat(runs_api, model=model, response_format=None)
    for stub in (openai_stub, anthropic_stub):
        stub.script.reply, stub.script.truncated = "Sunny and", True

    if streamed:
        events = stream(runs_api, PATH, **full_body())
        finish, request_id = events[-1]["finish_reason"], events[0]["request_id"]
    else:
        result = run(runs_api, PATH, **full_body())
        finish, request_id = result["finish_reason"], result["id"]

    assert finish == "length"
    assert record(runs_api, request_id)["output"] == {
        "content": "Sunny and",
        "finish_reason": "length",
    }
