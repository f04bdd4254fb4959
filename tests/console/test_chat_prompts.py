"""Chat prompts in the console (issue 48 point 6): a version read as messages, the editor and its
checks as you type, the diff of two versions beside their outcomes, and the run panel's typed
inputs, in Chromium at laptop and phone width, light and dark."""

from __future__ import annotations

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
