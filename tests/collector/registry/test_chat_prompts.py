"""Chat prompts in the registry (docs/api-notes.md, Chat prompts): a version's messages,
tools, tool choice, response format, variables schema and config, through the create,
PATCH, rollback, versions, labels and template routes, on the real store."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail._types import TemplatePayload
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub
from tests.keys import DEFAULT_AUTH

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You help {{user.name}}.{{#vip}} They are a VIP.{{/vip}}"},
    {"type": "placeholder", "name": "history"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "{{question}}{{! a comment }}"},
            {"type": "image_url", "image_url": {"url": "{{{image}}}", "detail": "low"}},
        ],
    },
    {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "{{^found}}nothing{{/found}}"},
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
TOOL_CHOICE = {"type": "function", "function": {"name": "lookup"}}
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
    "properties": {"question": {"type": "string"}, "vip": {"type": "boolean"}},
    "required": ["question"],
}
CONFIG = {"team": "support", "ticket": 7}
CHAT = {
    "name": "helper",
    "type": "chat",
    "messages": MESSAGES,
    "model": "gpt-4o",
    "tools": TOOLS,
    "tool_choice": TOOL_CHOICE,
    "response_format": RESPONSE_FORMAT,
    "variables_schema": SCHEMA,
    "config": CONFIG,
}
EXTRAS = {
    "tools": TOOLS,
    "tool_choice": TOOL_CHOICE,
    "response_format": RESPONSE_FORMAT,
    "variables_schema": SCHEMA,
    "config": CONFIG,
}


def created(api: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def refused(response: Any, code: str, field: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error["details"]["field"] == field, error
    assert field.split(".")[0] in error["message"], error
    return error


def chat_fields(answer: dict[str, Any]) -> dict[str, Any]:
    keys = ("type", "template", "messages", *EXTRAS)
    return {key: answer.get(key, "<absent>") for key in keys}


WHOLE = {"type": "chat", "template": None, "messages": MESSAGES, **EXTRAS}


def test_a_chat_prompt_round_trips_every_field_through_every_version_read(
    api: TestClient,
) -> None:
    answer = created(api, {**CHAT, "labels": ["production"]})

    assert chat_fields(answer) == WHOLE
    assert chat_fields(api.get("/v1/prompts/helper").json()["data"]) == WHOLE
    (item,) = api.get("/v1/prompts/helper/versions").json()["data"]
    assert chat_fields(item) == WHOLE and item["labels"] == ["production"]
    detail = api.get("/v1/prompts/helper/versions/1").json()["data"]
    assert chat_fields(detail) == WHOLE
    # A message's unset fields stay out, and a placeholder is stored as sent.
    assert detail["messages"][1] == {"type": "placeholder", "name": "history"}


def test_patch_of_any_chat_field_makes_a_version_and_rollback_restores_them_all(
    api: TestClient,
) -> None:
    created(api, CHAT)
    changes: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": "Just {{question}}"}]},
        {"tools": [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "find"}}]},
        {"tool_choice": "required"},
        {"response_format": {"type": "json_object"}},
        {"variables_schema": {"type": "object", "properties": {"q": {"type": "integer"}}}},
        {"config": ["any", {"json": True}]},
    ]
    for number, change in enumerate(changes, start=2):
        response = api.patch("/v1/prompts/helper", json=change)
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        ((key, value),) = change.items()
        assert data["version"] == number and data[key] == value
        assert api.get(f"/v1/prompts/helper/versions/{number}").json()["data"][key] == value

    newest = api.get("/v1/prompts/helper/versions/7").json()["data"]
    assert {key: newest[key] for key in ("messages", *EXTRAS)} == {
        key: value for change in changes for key, value in change.items()
    }

    rolled = api.post("/v1/prompts/helper/rollback", json={"version": 1, "labels": ["stable"]})
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["data"]["version"] == 8
    assert chat_fields(api.get("/v1/prompts/helper/versions/8").json()["data"]) == WHOLE
    by_label = api.get("/v1/prompts/helper/versions/by-label/stable/template").json()
    assert by_label["version"] == 8 and by_label["messages"] == MESSAGES


def test_patch_with_null_leaves_an_optional_field_out_of_the_new_version(
    api: TestClient,
) -> None:
    created(api, CHAT)

    response = api.patch("/v1/prompts/helper", json={"tools": None, "tool_choice": None})

    assert response.status_code == 200, response.text
    version = api.get("/v1/prompts/helper/versions/2").json()["data"]
    assert "tools" not in version and "tool_choice" not in version
    assert version["response_format"] == RESPONSE_FORMAT and version["messages"] == MESSAGES
    assert api.get("/v1/prompts/helper/versions/1").json()["data"]["tools"] == TOOLS


def test_chat_template_payload_has_messages_placeholders_and_variables(api: TestClient) -> None:
    created(api, {**CHAT, "parameters": {"temperature": 0.3, "max_tokens": 50}})

    payload = api.get("/v1/prompts/helper/template").json()

    assert payload["type"] == "chat" and payload["content"] is None
    assert payload["messages"] == MESSAGES
    assert payload["placeholders"] == ["history"]
    assert payload["tools"] == TOOLS and payload["tool_choice"] == TOOL_CHOICE
    assert payload["response_format"] == RESPONSE_FORMAT and payload["config"] == CONFIG
    # From the schema: its properties, typed, and whether each is required.
    assert payload["variables"] == {
        "question": {"type": "string", "required": True},
        "vip": {"type": "boolean", "required": False},
    }
    assert (payload["provider"], payload["model"]) == ("openai", "gpt-4o")
    assert (payload["temperature"], payload["max_tokens"]) == (0.3, 50)


def test_without_a_schema_the_messages_variables_are_required_strings_sections_any(
    api: TestClient,
) -> None:
    created(api, {"name": "plain", "type": "chat", "messages": MESSAGES, "model": "gpt-4o"})

    payload = api.get("/v1/prompts/plain/template").json()

    assert payload["variables"] == {
        "user": {"type": "any", "required": True},  # a dotted name: an object
        "vip": {"type": "any", "required": True},  # a section
        "question": {"type": "string", "required": True},
        "image": {"type": "string", "required": True},
        "found": {"type": "any", "required": False},  # an inverted section
    }
    # Unset optional fields are null in a chat prompt's payload.
    assert payload["tools"] is None and payload["response_format"] is None


def test_each_refused_field_is_named(api: TestClient) -> None:
    created(api, CHAT)
    created(api, {"name": "text", "template": "Hi {name}", "model": "gpt-4o"})
    post = lambda **fields: api.post("/v1/prompts", json={**CHAT, "name": "new", **fields})  # noqa: E731

    refused(post(template="Hi {name}"), "VALIDATION_ERROR", "template")
    refused(
        api.post("/v1/prompts", json={"name": "t2", "template": "x", "model": "m", "messages": []}),
        "VALIDATION_ERROR",
        "messages",
    )
    refused(post(messages=None), "VALIDATION_ERROR", "messages")
    refused(api.patch("/v1/prompts/helper", json={"template": "x"}), "VALIDATION_ERROR", "template")
    refused(
        api.patch("/v1/prompts/text", json={"messages": [{"role": "user", "content": "x"}]}),
        "VALIDATION_ERROR",
        "messages",
    )
    refused(api.patch("/v1/prompts/helper", json={"type": "text"}), "VALIDATION_ERROR", "type")
    refused(
        post(variables_schema={"type": "object", "properties": 5}),
        "VALIDATION_ERROR",
        "variables_schema",
    )
    refused(post(variables_schema={"type": "string"}), "VALIDATION_ERROR", "variables_schema")
    refused(
        post(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]),
        "VALIDATION_ERROR",
        "tools.0.function.parameters",
    )
    refused(post(tool_choice="sometimes"), "VALIDATION_ERROR", "tool_choice")
    bad_role = refused(
        post(messages=[{"role": "robot", "content": "x"}]), "VALIDATION_ERROR", "messages.0.role"
    )
    assert "system" in bad_role["message"]
    video = [{"role": "user", "content": [{"type": "video", "url": "v"}]}]
    refused(post(messages=video), "VALIDATION_ERROR", "messages.0.content")
    refused(post(messages=[{"role": "tool", "content": "x"}]), "VALIDATION_ERROR", "messages.0")
    unclosed = [{"role": "user", "content": "ok"}, {"role": "user", "content": "{{#a}}open"}]
    error = refused(post(messages=unclosed), "INVALID_TEMPLATE", "messages.1.content")
    assert error["type"] == "validation_error"
    refused(
        api.patch("/v1/prompts/helper", json={"messages": unclosed}),
        "INVALID_TEMPLATE",
        "messages.1.content",
    )

    # Nothing refused was stored.
    assert api.get("/v1/prompts/new").status_code == 404
    assert [v["version"] for v in api.get("/v1/prompts/helper/versions").json()["data"]] == [1]
    assert [v["version"] for v in api.get("/v1/prompts/text/versions").json()["data"]] == [1]


def test_a_text_prompt_answers_as_before_and_may_carry_the_extras(api: TestClient) -> None:
    answer = created(api, {"name": "text", "template": "Hi {name}", "model": "gpt-4o"})

    assert set(answer) == {
        "id", "name", "description", "template", "model", "parameters", "version", "tags",
        "folder", "created_at", "updated_at",
    }  # fmt: skip
    version = api.get("/v1/prompts/text/versions/1").json()["data"]
    assert "type" not in version and "messages" not in version
    payload = api.get("/v1/prompts/text/template").json()
    assert payload["type"] == "text" and payload["content"] == "Hi {{name}}"
    assert "messages" not in payload and "tools" not in payload
    # The SDK's template model still reads a text prompt's payload.
    parsed = TemplatePayload.model_validate(payload)
    assert (parsed.type, parsed.content) == ("text", "Hi {{name}}")
    assert list(parsed.variables) == ["name"]

    patched = api.patch("/v1/prompts/text", json={"tools": TOOLS, "config": CONFIG})

    assert patched.status_code == 200, patched.text
    data = patched.json()["data"]
    assert (data["type"], data["template"], data["tools"], data["config"]) == (
        "text",
        "Hi {name}",
        TOOLS,
        CONFIG,
    )
    payload = api.get("/v1/prompts/text/template").json()
    assert payload["tools"] == TOOLS and payload["content"] == "Hi {{name}}"


def test_a_second_projects_key_sees_none_of_it(api: TestClient) -> None:
    created(api, {**CHAT, "labels": ["production"]})
    key = api.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    other = TestClient(api.app, headers={"X-API-Key": key})

    for path in (
        "/v1/prompts/helper",
        "/v1/prompts/helper/versions",
        "/v1/prompts/helper/versions/1",
        "/v1/prompts/helper/template",
        "/v1/prompts/helper/versions/by-label/production/template",
    ):
        assert other.get(path).json()["error"]["code"] == "PROMPT_NOT_FOUND", path
    assert other.get("/v1/prompts").json()["data"] == []
    assert other.patch("/v1/prompts/helper", json={"config": {}}).status_code == 404
    assert api.get("/v1/prompts/helper/versions").json()["data"][0]["version"] == 1


def test_versions_stored_before_chat_prompts_read_as_text_after_the_upgrade(
    settings: Settings,
) -> None:
    app = create_app(settings)
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        created(api, {"name": "old", "template": "Hi {name}", "model": "gpt-4o"})
        before = api.get("/v1/prompts/old/versions/1").json()
        client = app.state.services.store.client
        # The store as the release before chat prompts left it.
        db = f"`{settings.database}`"
        client.command(f"ALTER TABLE {db}.prompt_versions DROP COLUMN chat")
        client.command(
            f"ALTER TABLE {db}.schema_migrations DELETE WHERE version = 28",
            settings={"mutations_sync": 2},
        )

    app = create_app(settings)  # start-up adds the column
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        assert api.get("/v1/prompts/old/versions/1").json() == before
        assert api.get("/v1/prompts/old/template").json()["type"] == "text"
        response = api.patch("/v1/prompts/old", json={"messages": MESSAGES})
        refused(response, "VALIDATION_ERROR", "messages")


def test_a_run_of_a_chat_prompt_sends_its_rendered_messages_and_a_bad_one_sends_nothing(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    created(runs_api, CHAT)
    # Unfilled placeholder: refused before anything reaches the provider.
    response = runs_api.post("/v1/prompts/helper/run", json={"variables": {"question": "hi"}})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_TEMPLATE"
    assert error["details"]["missing_placeholders"] == ["history"]
    assert openai_stub.calls == []  # not an empty message to the provider

    variables = {"question": "hi", "user": {"name": "Ada"}, "image": "https://x/a.png"}
    response = runs_api.post(
        "/v1/prompts/helper/run", json={"variables": variables, "placeholders": {"history": []}}
    )
    assert response.status_code == 200, response.text
    sent = openai_stub.calls[-1].body
    assert sent["messages"][0] == {"role": "system", "content": "You help Ada."}
    assert sent["messages"][1]["content"][0] == {"type": "text", "text": "hi"}
    assert sent["messages"][1]["content"][1]["image_url"]["url"] == "https://x/a.png"
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "nothing"}
    assert (sent["tools"], sent["tool_choice"]) == (TOOLS, TOOL_CHOICE)
