"""Chat prompts in the console (issue 48 point 6): a version read as messages, the editor and its
checks as you type, the diff of two versions beside their outcomes, and the run panel's typed
inputs, in Chromium at laptop and phone width, light and dark."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from promptrail.testing import OpenAIStub, ToolCallReply

from .conftest import LAPTOP, PHONE, Console, expect
from .steps import card, fits, post, settled

if TYPE_CHECKING:
    from playwright.sync_api import Page

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


def seed_outcomes(client: httpx.Client) -> None:
    """Records of versions 1 and 2 of "forecast" in the last hour, with helpfulness scores:
    version 1 four calls (one failed, slower, cheaper), version 2 two (none failed)."""
    when = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    calls = [(1, 400, "error"), (1, 300, "success"), (1, 200, "success"), (1, 100, "success")]
    calls += [(2, 90, "success"), (2, 60, "success")]
    records = [
        {
            "id": f"req_forecast_{n}",
            "created_at": when,
            "prompt_name": "forecast",
            "version": version,
            "model": "gpt-4o-mini",
            "provider": "openai",
            "status": status,
            **({"error": "provider timed out"} if status == "error" else {}),
            "input_variables": {"city": "Oslo", "days": 3},
            "output": {"content": "Rain.", "finish_reason": "stop"},
            "usage": {"prompt_tokens": 100, "completion_tokens": 20},
            "latency_ms": latency,
        }
        for n, (version, latency, status) in enumerate(calls)
    ]
    assert post(client, "/v1/requests/batch", {"records": records})["rejected"] == []
    for n, (version, _, _) in enumerate(calls):
        value = 0.5 if version == 1 else 1.0
        post(
            client,
            "/v1/scores",
            {"request_id": f"req_forecast_{n}", "name": "helpfulness", "value": value},
        )


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_two_versions_diff_beside_their_outcomes_over_one_window(
    console: Console, client: httpx.Client, viewport: dict[str, int]
) -> None:
    create_chat(client)
    changed_tool = json.loads(json.dumps(WEATHER_TOOL))
    changed_tool["function"]["parameters"]["properties"]["unit"] = {"enum": ["C", "F", "K"]}
    first = {**MESSAGES[0], "content": "You forecast the weather, briefly."}
    client.patch(
        "/v1/prompts/forecast",
        json={
            "messages": [first, *MESSAGES[1:]],
            "tools": [changed_tool],
            "parameters": {"temperature": 0.7},
        },
    ).raise_for_status()
    seed_outcomes(client)
    console.page.set_viewport_size(viewport)
    page = settled(console.sign_in(route="#/prompts/forecast"))
    page.get_by_label("Version", exact=True).select_option("1")
    page.get_by_label("with", exact=True).select_option("2")
    page.get_by_role("button", name="Show diff").click()

    expect(page.get_by_role("heading", name="forecast: v1 → v2")).to_be_visible()
    settled(page)
    # The changes are the diff route's, each with its two sides.
    api_changes = client.get("/v1/prompts/forecast/diff?from=1&to=2").json()["data"]["changes"]
    changes = page.get_by_role("list", name="Changes").locator(":scope > li")
    expect(changes.locator(".change-path")).to_have_text([c["path"] for c in api_changes])
    assert "tools.get_weather.parameters.properties.unit.enum" in [c["path"] for c in api_changes]
    message = changes.filter(has_text="messages[0].content")
    expect(message.locator("ins").first).to_be_visible()

    def words(tag: str) -> list[str]:
        return [w for w in message.locator(tag).all_inner_texts() if w.strip()]

    assert words("del") == ["weather.{{#metric}}", "Use", "Celsius.{{/metric}}"]
    assert words("ins") == ["weather,", "briefly."]

    # Beside it, the two versions' outcomes over the same window, as analytics give them.
    outcomes = (
        card(page, "Outcomes")
        .locator("table.outcomes tbody tr")
        .evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")
    )
    shown = {row[0].split("\n")[0]: row[1:] for row in outcomes}
    assert shown["Records"] == ["4", "2", ""]
    assert shown["Error rate"] == ["25.0%", "0.0%", "\u221225.0%"]
    assert shown["helpfulness (mean)"] == ["0.5", "1", "+0.5"]
    latency = client.get(
        "/v1/requests/analytics",
        params={"metric": "latency", "group_by": "version", "prompt_name": "forecast"},
    ).json()["data"]["groups"]
    p95 = {g["name"]: round(g["p95"]) for g in latency}
    assert shown["p95 latency"][:2] == [f"{p95['1']:,} ms", f"{p95['2']:,} ms"]
    better = card(page, "Outcomes").locator("td.change.better")
    # Error rate, both latencies and the score; the same tokens cost the same per record.
    expect(better).to_have_count(4)
    assert fits(page)
    # The table fits its card too (no sideways scrolling inside it), phone included.
    wrap = card(page, "Outcomes").locator(".table-wrap")
    assert wrap.evaluate("el => el.scrollWidth <= el.clientWidth")
    both_schemes(console, f"chat-diff-{viewport['width']}", page)

    # Another window is one click: the figures are asked again for it.
    card(page, "Outcomes").get_by_role("link", name="Last 24 hours").click()
    expect(card(page, "Outcomes").get_by_role("link", name="Last 24 hours")).to_have_attribute(
        "aria-current", "page"
    )
    expect(card(page, "Outcomes").locator("tbody tr").first).to_contain_text("4")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_run_panel_types_the_variables_by_the_schema_and_fills_placeholders_as_json(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub, viewport: dict[str, int]
) -> None:
    openai_stub.script.reply = '{"summary": "Rain, then sun."}'
    create_chat(client)
    console.page.set_viewport_size(viewport)
    page = settled(console.sign_in(route="#/prompts/forecast"))
    run = page.get_by_role("form", name="Run this prompt")
    expect(run.locator(".field > label")).to_have_text(
        ["city", "days", "metric", "history (placeholder)", "User input (optional)"]
    )
    # Each variable's input is of its schema's type, and says whether it is required.
    expect(run.get_by_label("days", exact=True)).to_have_attribute("type", "number")
    assert run.get_by_label("metric", exact=True).evaluate("el => el.tagName") == "SELECT"
    expect(run.locator(".field", has=page.get_by_label("days", exact=True))).to_contain_text(
        "integer, required"
    )
    expect(run.locator(".field", has=page.get_by_label("metric", exact=True))).to_contain_text(
        "boolean, optional"
    )

    run.get_by_role("button", name="Run").click()
    expect(run.get_by_role("alert")).to_contain_text("Fill in city, days")
    run.get_by_label("city", exact=True).fill("Oslo")
    run.get_by_label("days", exact=True).fill("2.5")
    run.get_by_label("history (placeholder)").fill('[{"role": "user", "content": "Hi"')
    run.get_by_role("button", name="Run").click()
    expect(run.get_by_role("alert")).to_contain_text("days must be a whole number")
    expect(run.get_by_role("alert")).to_contain_text("history must be a JSON list of messages")
    assert openai_stub.calls == []

    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    run.get_by_label("days", exact=True).fill("3")
    run.get_by_label("metric", exact=True).select_option("true")
    run.get_by_label("history (placeholder)").fill(json.dumps(history))
    run.get_by_role("button", name="Run").click()

    expect(run.locator("pre.run-output")).to_have_text('{"summary": "Rain, then sun."}')
    expect(run.get_by_role("status")).to_contain_text("Done:")
    sent = openai_stub.calls[-1].body
    assert sent["messages"] == [
        {"role": "system", "content": "You forecast the weather. Use Celsius."},
        *history,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The next 3 days in Oslo, please."},
                {"type": "image_url", "image_url": {"url": "https://maps.example/Oslo.png"}},
            ],
        },
    ]
    assert sent["tools"] == [WEATHER_TOOL]
    assert sent["response_format"] == ANSWER_FORMAT
    logged = client.get("/v1/requests", params={"prompt_name": "forecast"}).json()["data"]
    assert logged[0]["input_variables"] == {"city": "Oslo", "days": 3, "metric": True}
    assert fits(page)
    both_schemes(console, f"chat-run-{viewport['width']}", page)

    # A model that calls a tool: the call is shown with its arguments.
    openai_stub.script.tool_call = ToolCallReply("get_weather", {"city": "Oslo", "unit": "C"})
    run.get_by_role("button", name="Run").click()
    calls = run.get_by_role("list", name="Tool calls")
    expect(calls).to_have_text('tool call get_weather({"city": "Oslo", "unit": "C"})')
    expect(run.get_by_role("status")).to_contain_text("Finished: tool_calls.")
