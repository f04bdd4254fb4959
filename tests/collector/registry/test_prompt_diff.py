"""The diff of two versions of a prompt (docs/api-notes.md, Chat prompts: Diff): what changed,
per message, per tool (its JSON Schema key by key) and per parameter, on the real store, over
HTTP and through the SDK's clients against a live collector."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

import promptrail
from promptrail._prompt_diff import PromptDiff
from tests.keys import DEFAULT_KEY

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a weather assistant."},
    {"type": "placeholder", "name": "history"},
    {"role": "user", "content": "What is the weather in {{city}}?"},
]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "forecast",
        "schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}, "degrees": {"type": "number"}},
            "required": ["summary"],
        },
    },
}
UNIT = {"type": "string", "enum": ["celsius", "fahrenheit"]}


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture
def weather(api: TestClient) -> None:
    """Chat prompt ``weather``: version 1 (label ``prod``), version 2 (label ``staging``)
    with a message changed, one added, a tool's parameter property added, the temperature
    changed and the answer schema's ``required`` changed."""
    ok(
        api.post(
            "/v1/prompts",
            json={
                "name": "weather",
                "type": "chat",
                "messages": MESSAGES,
                "model": "gpt-4o",
                "parameters": {"temperature": 0.2, "max_tokens": 200},
                "tools": TOOLS,
                "response_format": RESPONSE_FORMAT,
                "labels": ["prod"],
            },
        ),
        201,
    )
    messages = copy.deepcopy(MESSAGES)
    messages[2]["content"] = "What is the weather in {{city}} today?"
    messages.append({"role": "assistant", "content": "Let me look that up."})
    tools = copy.deepcopy(TOOLS)
    tools[0]["function"]["parameters"]["properties"]["unit"] = UNIT
    answer = copy.deepcopy(RESPONSE_FORMAT)
    answer["json_schema"]["schema"]["required"] = ["summary", "degrees"]
    ok(
        api.patch(
            "/v1/prompts/weather",
            json={
                "messages": messages,
                "tools": tools,
                "response_format": answer,
                "parameters": {"temperature": 0.7, "max_tokens": 200},
                "labels": ["staging"],
            },
        )
    )


# What changed from version 1 to version 2 of ``weather``, in the answer's order.
WEATHER_CHANGES = [
    {
        "path": "messages[2].content",
        "kind": "changed",
        "before": "What is the weather in {{city}}?",
        "after": "What is the weather in {{city}} today?",
    },
    {
        "path": "messages[3]",
        "kind": "added",
        "after": {"role": "assistant", "content": "Let me look that up."},
    },
    {"path": "tools.get_weather.parameters.properties.unit", "kind": "added", "after": UNIT},
    {
        "path": "response_format.json_schema.schema.required",
        "kind": "changed",
        "before": ["summary"],
        "after": ["summary", "degrees"],
    },
    {"path": "parameters.temperature", "kind": "changed", "before": 0.2, "after": 0.7},
]


def reversed_changes(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same changes seen from the other side: an addition is a removal."""
    flipped = {"added": "removed", "removed": "added", "changed": "changed"}
    result = []
    for change in changes:
        other: dict[str, Any] = {"path": change["path"], "kind": flipped[change["kind"]]}
        if "after" in change:
            other["before"] = change["after"]
        if "before" in change:
            other["after"] = change["before"]
        result.append(other)
    return result


@pytest.mark.usefixtures("weather")
def test_a_chat_prompts_diff_names_each_changed_message_tool_key_and_parameter(
    api: TestClient,
) -> None:
    diff = ok(api.get("/v1/prompts/weather/diff", params={"from": 1, "to": 2}))

    assert diff == {"from": 1, "to": 2, "changes": WEATHER_CHANGES}


@pytest.mark.usefixtures("weather")
def test_labels_name_the_versions_and_the_answer_gives_their_numbers(api: TestClient) -> None:
    by_labels = ok(api.get("/v1/prompts/weather/diff", params={"from": "prod", "to": "staging"}))
    backwards = ok(api.get("/v1/prompts/weather/diff", params={"from": "latest", "to": "1"}))
    same = ok(api.get("/v1/prompts/weather/diff", params={"from": "staging", "to": 2}))

    assert by_labels == {"from": 1, "to": 2, "changes": WEATHER_CHANGES}
    assert backwards == {"from": 2, "to": 1, "changes": reversed_changes(WEATHER_CHANGES)}
    assert same == {"from": 2, "to": 2, "changes": []}


def test_a_tool_added_or_removed_is_one_change_under_its_name(api: TestClient) -> None:
    ok(
        api.post(
            "/v1/prompts",
            json={
                "name": "tools",
                "type": "chat",
                "messages": MESSAGES,
                "model": "gpt-4o",
                "tools": TOOLS[:1],
            },
        ),
        201,
    )
    ok(api.patch("/v1/prompts/tools", json={"tools": TOOLS[1:], "tool_choice": "required"}))

    diff = ok(api.get("/v1/prompts/tools/diff", params={"from": 1, "to": 2}))

    assert diff["changes"] == [
        {"path": "tools.get_weather", "kind": "removed", "before": TOOLS[0]},
        {"path": "tools.get_time", "kind": "added", "after": TOOLS[1]},
        {"path": "tool_choice", "kind": "added", "after": "required"},
    ]


def test_a_text_prompts_diff_names_its_template_model_and_parameters(api: TestClient) -> None:
    ok(
        api.post(
            "/v1/prompts",
            json={
                "name": "greet",
                "template": "Hello {name}",
                "model": "gpt-4o",
                "parameters": {"temperature": 0.5},
                "tags": ["a"],
            },
        ),
        201,
    )
    ok(
        api.patch(
            "/v1/prompts/greet",
            json={
                "template": "Hi {name}, welcome",
                "model": "gpt-4o-mini",
                "description": "Greets a user",
                "parameters": {"temperature": 0.5, "max_tokens": 50},
                "tags": ["a", "b"],
            },
        )
    )

    diff = ok(api.get("/v1/prompts/greet/diff", params={"from": 1, "to": "latest"}))

    assert diff == {
        "from": 1,
        "to": 2,
        "changes": [
            {"path": "description", "kind": "added", "after": "Greets a user"},
            {"path": "model", "kind": "changed", "before": "gpt-4o", "after": "gpt-4o-mini"},
            {
                "path": "template",
                "kind": "changed",
                "before": "Hello {name}",
                "after": "Hi {name}, welcome",
            },
            {"path": "tags", "kind": "changed", "before": ["a"], "after": ["a", "b"]},
            {"path": "parameters.max_tokens", "kind": "added", "after": 50},
        ],
    }


def test_a_json_null_or_a_boolean_is_a_value_of_its_own(api: TestClient) -> None:
    # ``true`` is not ``1`` and a ``null`` kept in the config is shown as one.
    ok(
        api.post(
            "/v1/prompts",
            json={
                "name": "cfg",
                "template": "x",
                "model": "gpt-4o",
                "config": {"a": 1, "b": None, "c": 2},
            },
        ),
        201,
    )
    ok(api.patch("/v1/prompts/cfg", json={"config": {"a": True, "b": 3, "c": 2.0}}))

    diff = ok(api.get("/v1/prompts/cfg/diff", params={"from": 1, "to": 2}))

    assert diff["changes"] == [
        {"path": "config.a", "kind": "changed", "before": 1, "after": True},
        {"path": "config.b", "kind": "changed", "before": None, "after": 3},
    ]


@pytest.mark.usefixtures("weather")
@pytest.mark.parametrize(
    ("path", "query", "status", "code", "details"),
    [
        ("nope", {"from": 1, "to": 2}, 404, "PROMPT_NOT_FOUND", {"prompt_name": "nope"}),
        ("nope", {"from": 0, "to": 2}, 404, "PROMPT_NOT_FOUND", {"prompt_name": "nope"}),
        (
            "weather",
            {"from": 1, "to": 9},
            404,
            "VERSION_NOT_FOUND",
            {"prompt_name": "weather", "version": 9},
        ),
        (
            "weather",
            {"from": 0, "to": 2},
            404,
            "VERSION_NOT_FOUND",
            {"prompt_name": "weather", "version": 0},
        ),
        (
            "weather",
            {"from": "canary", "to": 2},
            404,
            "LABEL_NOT_FOUND",
            {"prompt_name": "weather", "label": "canary"},
        ),
        ("weather", {"to": 2}, 400, "VALIDATION_ERROR", {"field": "from"}),
        ("weather", {"from": 1}, 400, "VALIDATION_ERROR", {"field": "to"}),
        ("weather", {"from": "not a label", "to": 2}, 400, "VALIDATION_ERROR", {"field": "from"}),
        ("weather", {"from": 1, "to": "9" * 101}, 400, "VALIDATION_ERROR", {"field": "to"}),
    ],
)
def test_a_bad_diff_is_a_contract_error(
    api: TestClient,
    path: str,
    query: dict[str, Any],
    status: int,
    code: str,
    details: dict[str, Any],
) -> None:
    response = api.get(f"/v1/prompts/{path}/diff", params=query)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert details.items() <= error["details"].items()


@pytest.mark.usefixtures("weather")
def test_another_projects_key_finds_no_prompt_to_diff(api: TestClient) -> None:
    other_key: str = api.app.state.services.keys.create("other")
    other = TestClient(api.app, headers={"X-API-Key": other_key})

    response = other.get("/v1/prompts/weather/diff", params={"from": 1, "to": 2})

    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "PROMPT_NOT_FOUND"


def expected_sdk_changes() -> list[dict[str, Any]]:
    """The changes as the SDK's models hold them: each with both sides, absent ones None."""
    return [{"before": None, "after": None, **change} for change in WEATHER_CHANGES]


@pytest.mark.usefixtures("weather")
def test_the_sdk_client_diffs_two_versions(sdk: promptrail.Client) -> None:
    diff = sdk.prompts.diff("weather", from_="prod", to=2)

    assert (diff.from_, diff.to) == (1, 2)
    assert [change.model_dump() for change in diff.changes] == expected_sdk_changes()
    with pytest.raises(promptrail.NotFoundError):
        sdk.prompts.diff("weather", from_=1, to="canary")


@pytest.mark.usefixtures("weather")
def test_the_async_sdk_client_diffs_two_versions(live_url: str) -> None:
    async def diff() -> PromptDiff:
        async with promptrail.AsyncClient(api_key=DEFAULT_KEY, base_url=live_url) as client:
            return await client.prompts.diff("weather", from_=1, to="staging")

    found = asyncio.run(diff())

    assert (found.from_, found.to) == (1, 2)
    assert [change.model_dump() for change in found.changes] == expected_sdk_changes()
