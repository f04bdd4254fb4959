"""Chat prompts in the console (issue 48 point 6): a version read as messages, the editor and its
checks as you type, the diff of two versions beside their outcomes, and the run panel's typed
inputs, in Chromium at laptop and phone width, light and dark."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from .conftest import LAPTOP, PHONE, Console
from .steps import card, fits, post, settled

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
            "required": ["city"],
        },
    },
}
ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "forecast",
        "schema": {"type": "object", "properties": {"summary": {"type": "string"}}},
        "strict": True,
    },
}
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "Where the user is"},
        "days": {"type": "integer"},
        "metric": {"type": "boolean"},
    },
    "required": ["city", "days"],
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You forecast the weather.{{#metric}} Use Celsius.{{/metric}}"},
    {"type": "placeholder", "name": "history"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "The next {{days}} days in {{city}}, please."},
            {"type": "image_url", "image_url": {"url": "https://maps.example/{{city}}.png"}},
        ],
    },
]


def create_chat(client: httpx.Client, name: str = "forecast", **fields: Any) -> dict[str, Any]:
    """Create chat prompt ``name`` with the weather messages, tool, schema and answer format."""
    body = {
        "name": name,
        "type": "chat",
        "messages": MESSAGES,
        "model": "gpt-4o-mini",
        "tools": [WEATHER_TOOL],
        "tool_choice": "auto",
        "response_format": ANSWER_FORMAT,
        "variables_schema": SCHEMA,
        "parameters": {"temperature": 0.3},
        **fields,
    }
    data: dict[str, Any] = post(client, "/v1/prompts", body)
    return data


def both_schemes(console: Console, name: str, page: Page) -> None:
    """Screenshots of the page in the light and the dark scheme (a reviewer's, not the docs')."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        console.screenshot(f"{name}-{scheme}", for_docs=False)
    page.emulate_media(color_scheme="light")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_chat_version_reads_as_messages_with_its_tools_format_and_variables(
    console: Console, client: httpx.Client, viewport: dict[str, int]
) -> None:
    create_chat(client)
    client.patch("/v1/prompts/forecast", json={"tool_choice": "required"}).raise_for_status()
    console.page.set_viewport_size(viewport)
    page = settled(console.sign_in(route="#/prompts/forecast"))

    messages = page.get_by_role("list", name="Messages").locator(":scope > li")
    expect(messages).to_have_count(3)
    expect(messages.nth(0).locator(".badge")).to_have_text("system")
    expect(messages.nth(0)).to_contain_text("You forecast the weather.{{#metric}} Use Celsius.")
    # The placeholder is its own row, saying a history goes there.
    expect(messages.nth(1)).to_have_class("chat-message placeholder")
    expect(messages.nth(1)).to_contain_text("history goes here")
    expect(messages.nth(1)).to_contain_text("placeholders.history")
    # The image part shows its URL template; nothing is loaded from it.
    expect(messages.nth(2).locator(".image-url")).to_have_text("https://maps.example/{{city}}.png")
    assert page.locator("img").count() == 0
    tools = card(page, "Tools")
    expect(tools.locator(".tool h3")).to_have_text("get_weather")
    expect(tools).to_contain_text("The weather in a city now")
    expect(tools.locator("pre.schema")).to_contain_text('"required": [')
    expect(tools.locator("dd")).to_have_text("required")
    expect(card(page, "Response format")).to_contain_text("JSON to a schema")
    expect(card(page, "Response format").locator("pre")).to_contain_text('"summary"')
    variables = (
        card(page, "Variables")
        .locator("table.variables tr")
        .evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()).slice(0, 3))"
        )
    )
    assert variables == [
        ["city", "string", "required"],
        ["days", "integer", "required"],
        ["metric", "boolean", "optional"],
    ]
    assert fits(page)
    both_schemes(console, f"chat-version-{viewport['width']}", page)

    # An older version is shown on asking: version 1 had tool choice auto.
    page.get_by_label("Version shown").select_option("1")
    expect(page.get_by_role("heading", name="Version 1")).to_be_visible()
    expect(card(page, "Tools").locator("dd")).to_have_text("auto")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_editor_creates_a_chat_prompt_checking_templates_and_schemas_as_you_type(
    console: Console, client: httpx.Client, viewport: dict[str, int]
) -> None:
    console.page.set_viewport_size(viewport)
    page = settled(console.sign_in(route="#/prompts/+new"))
    page.get_by_label("Chat", exact=False).check()
    form = page.get_by_role("form", name="Create prompt")
    form.get_by_label("Name", exact=True).fill("triage")
    form.get_by_label("Model", exact=True).fill("gpt-4o-mini")

    # An unclosed section is named under its message as it is typed.
    first = form.get_by_label("Message 1", exact=True)
    first.fill("Sort the ticket.{{#urgent}} Answer fast.")
    problem = form.locator("#message-1-problem")
    expect(problem).to_have_text('The template does not parse: Unclosed section "urgent" at 40.')
    expect(first).to_have_attribute("aria-invalid", "true")
    first.fill("Sort the ticket.{{#urgent}} Answer fast.{{/urgent}}")
    expect(problem).to_be_empty()

    form.get_by_role("button", name="Add message").click()
    form.get_by_label("Role of message 2").select_option("user")
    form.get_by_label("Message 2", exact=True).fill("Ticket: {{ticket}}")
    form.get_by_role("button", name="Add placeholder").click()
    form.get_by_label("Placeholder 3 name").fill("history")
    form.get_by_role("button", name="Move message 3 up").click()
    expect(form.get_by_label("Placeholder 2 name")).to_have_value("history")
    expect(form.get_by_label("Message 3", exact=True)).to_have_value("Ticket: {{ticket}}")

    # A schema that is no object schema is named too, and nothing is saved while it is.
    schema = form.get_by_label("Variables schema (JSON Schema)")
    schema.fill('{"type": "array"}')
    expect(form.locator("#field-variables_schema-problem")).to_have_text(
        'The variables schema must have "type": "object".'
    )
    schema.fill('{"type": "object", "properties": ')
    expect(form.locator("#field-variables_schema-problem")).to_contain_text("Not JSON")
    form.get_by_label("Message 1", exact=True).fill("Sort it.{{/oops}}")
    if viewport is LAPTOP:
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            console.screenshot(f"chat-editor-problems-{scheme}", for_docs=False)
        page.emulate_media(color_scheme="light")
    else:
        console.screenshot("chat-editor-problems-phone", for_docs=False)
    form.get_by_role("button", name="Create prompt").click()
    expect(form.get_by_role("alert")).to_have_text(
        "Fix the fields marked above first: nothing was saved."
    )
    assert client.get("/v1/prompts/triage").status_code == 404
    form.get_by_label("Message 1", exact=True).fill(
        "Sort the ticket.{{#urgent}} Answer fast.{{/urgent}}"
    )

    # The collector's own check is the final word: a type JSON Schema does not know.
    schema.fill('{"type": "object", "properties": {"ticket": {"type": "text"}}}')
    expect(form.locator("#field-variables_schema-problem")).to_be_empty()
    form.get_by_role("button", name="Create prompt").click()
    expect(form.get_by_role("alert")).to_contain_text("VALIDATION_ERROR")
    expect(form.get_by_role("alert")).to_contain_text("variables_schema")

    schema.fill(
        json.dumps(
            {
                "type": "object",
                "properties": {"ticket": {"type": "string"}, "urgent": {"type": "boolean"}},
                "required": ["ticket"],
            }
        )
    )
    form.get_by_label("Tools (JSON)").fill(json.dumps([ESCALATE]))
    form.get_by_label("Tool choice").select_option("function")
    form.get_by_label("Function to call").fill("escalate")
    form.get_by_label("Parameters (JSON)").fill('{"temperature": 0}')
    assert fits(page)
    form.get_by_role("button", name="Create prompt").click()

    expect(page.get_by_role("heading", name="Version 1")).to_be_visible()
    saved = client.get("/v1/prompts/triage/versions/1").json()["data"]
    assert saved["type"] == "chat"
    assert saved["messages"] == [
        {"role": "system", "content": "Sort the ticket.{{#urgent}} Answer fast.{{/urgent}}"},
        {"type": "placeholder", "name": "history"},
        {"role": "user", "content": "Ticket: {{ticket}}"},
    ]
    assert saved["tools"] == [ESCALATE]
    assert saved["tool_choice"] == {"type": "function", "function": {"name": "escalate"}}
    assert saved["variables_schema"]["required"] == ["ticket"]
    assert saved["parameters"] == {"temperature": 0}
    assert "response_format" not in saved


ESCALATE = {
    "type": "function",
    "function": {
        "name": "escalate",
        "description": "Hand the ticket to a person",
        "parameters": {"type": "object", "properties": {"reason": {"type": "string"}}},
    },
}


def test_editing_a_chat_prompt_starts_from_its_newest_version_and_saves_the_next(
    console: Console, client: httpx.Client
) -> None:
    create_chat(client)
    page = settled(console.sign_in(route="#/prompts/forecast/edit"))
    form = page.get_by_role("form", name="Save new version")
    # Parts are edited as JSON; the placeholder keeps its row.
    expect(form.get_by_label("Placeholder 2 name")).to_have_value("history")
    expect(
        form.get_by_role("checkbox", name="parts (JSON: text and images)").nth(1)
    ).to_be_checked()
    assert (
        json.loads(form.get_by_label("Message 3", exact=True).input_value())
        == MESSAGES[2]["content"]
    )
    expect(form.get_by_label("Tool choice")).to_have_value("auto")
    form.get_by_role("button", name="Remove message 2").click()
    form.get_by_label("Response format (JSON)").fill("")
    form.get_by_role("button", name="Save new version").click()

    expect(page.get_by_role("heading", name="Version 2")).to_be_visible()
    saved = client.get("/v1/prompts/forecast/versions/2").json()["data"]
    assert saved["messages"] == [MESSAGES[0], MESSAGES[2]]
    assert "response_format" not in saved
    assert saved["tools"] == [WEATHER_TOOL]
    assert saved["variables_schema"] == SCHEMA
