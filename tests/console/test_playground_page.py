"""The playground page in Chromium against a live collector whose calls go to the OpenAI stub:
a two-by-two grid streamed cell by cell with each cell's tokens, cost, latency and time to
first token, a failing cell beside good ones, the estimate; "Open in playground" from a version
and from a record; "Save as new version" naming the run, and the version linking back to the
run's records. Laptop and phone width, light and dark."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from promptrail.testing import OpenAIStub

from .conftest import PHONE, Console, expect
from .steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    add_person,
    fits,
    new_tab,
    password_sign_in,
    post,
    settled,
    signed_in,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You greet people."},
    {"role": "user", "content": "Say hello to {{name}}."},
]


def make_greeting(client: httpx.Client) -> None:
    """Chat prompt "greeting" v1, one variable (name)."""
    post(
        client,
        "/v1/prompts",
        {"name": "greeting", "type": "chat", "messages": MESSAGES, "model": "gpt-4o-mini"},
    )


def grid_cells(page: Page) -> list[dict[str, str]]:
    """The grid's cells as a user reads them: where, status and text."""
    found = page.locator("td.grid-cell").evaluate_all(
        """cells => cells.map(c => ({
            row: c.dataset.row, column: c.dataset.column, status: c.dataset.status,
            text: c.innerText}))"""
    )
    return list(found)


@pytest.mark.parametrize(
    ("viewport", "scheme"),
    [(None, "light"), (None, "dark"), (PHONE, "light"), (PHONE, "dark")],
    ids=["laptop-light", "laptop-dark", "phone-light", "phone-dark"],
)
def test_run_all_streams_a_two_by_two_grid_with_each_cells_figures_and_a_failing_cell(
    console: Console,
    client: httpx.Client,
    openai_stub: OpenAIStub,
    viewport: dict[str, int] | None,
    scheme: str,
) -> None:
    make_greeting(client)
    page = console.page
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    if viewport:
        page.set_viewport_size(viewport)
    console.sign_in(route="#/prompts/greeting")
    settled(page)
    page.get_by_role("link", name="Open in playground").first.click()
    settled(page)
    expect(page.get_by_role("link", name="From greeting v1")).to_be_visible()
    expect(page.get_by_label("Message 2", exact=True)).to_have_value("Say hello to {{name}}.")

    page.get_by_label("name of row 1").fill("Ada")
    page.get_by_role("button", name="Add row").click()
    page.get_by_label("name of row 2").fill("Grace")
    page.get_by_role("button", name="Add column").click()
    page.get_by_label("Model of column 2").fill("gpt-4o")
    # The provider refuses the first call it gets: that cell fails, the others go on.
    openai_stub.script.failures = [400]
    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()

    cells = grid_cells(page)
    assert sorted((c["row"], c["column"]) for c in cells) == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    good = [c for c in cells if c["status"] == "success"]
    bad = [c for c in cells if c["status"] == "error"]
    assert len(good) == 3 and len(bad) == 1, cells
    for cell in good:
        assert "Hello from the stub provider." in cell["text"]
        for figure in ("tokens", "cost $", "latency", "ms", "TTFT", "record"):
            assert figure in cell["text"], cell
    assert "PROVIDER_ERROR" in bad[0]["text"]
    status = page.locator(".pg-status")
    expect(status).to_contain_text("Estimated before any call: $")
    expect(status).to_contain_text("tiktoken")
    header = page.locator(".playground-grid thead").inner_text()
    assert "gpt-4o-mini" in header and "gpt-4o" in header
    assert fits(page)
    console.screenshot(f"playground-{'phone' if viewport else 'laptop'}-{scheme}", for_docs=False)

    # Every cell that called the provider is a record of the playground's environment.
    records = client.get(
        "/v1/requests", params={"environment": "promptrail-playground", "limit": 10}
    ).json()["data"]
    assert len(records) == 4
    assert console.errors == []


def test_save_as_new_version_names_the_run_and_the_version_links_its_records(
    console: Console, client: httpx.Client
) -> None:
    make_greeting(client)
    page = console.sign_in(route="#/playground?prompt=greeting&version=1")
    settled(page)
    page.get_by_label("Message 1", exact=True).fill("You greet people warmly.")
    page.get_by_label("name of row 1").fill("Ada")
    # Beside the edited prompt, the stored v1 as it is: a run of its own.
    page.get_by_role("button", name="Add column").click()
    page.get_by_label("Prompt of column 2").select_option("1")
    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()
    assert [c["status"] for c in grid_cells(page)] == ["success", "success"]
    expect(page.locator(".playground-grid thead")).to_contain_text("v1")
    page.get_by_role("button", name="Save as new version").click()
    expect(page.get_by_text("Saved greeting v2 from run pg_")).to_be_visible()

    version = client.get("/v1/prompts/greeting/versions/2").json()["data"]
    assert version["messages"][0]["content"] == "You greet people warmly."
    run_id = version["source_run_id"]
    assert run_id.startswith("pg_")

    page.get_by_role("link", name="Open the prompt").click()
    settled(page)
    expect(page.get_by_text("Source run")).to_be_visible()
    console.screenshot("prompt-source-run", for_docs=False)
    page.get_by_role("link", name=run_id).click()
    settled(page)
    expect(page.locator("table.records tbody tr")).to_have_count(1)
    href = page.locator("table.records tbody tr a[href^='#/requests/']").first.get_attribute("href")
    assert href
    record_id = href.removeprefix("#/requests/").split("?")[0]
    detail = client.get(f"/v1/requests/{record_id}").json()["data"]
    # The run saved from is the edited prompt's (v1's own run names v1; this one its base).
    assert detail["metadata"]["playground_run_id"] == run_id
    assert detail["metadata"]["base_version"] == 1 and detail["version"] is None
    assert console.errors == []


def test_open_in_playground_from_a_record_brings_its_messages_tools_and_model(
    console: Console, client: httpx.Client, log: Any
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    log(
        {
            "id": "req_rec-1",
            "model": "gpt-4o-mini",
            "input": {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "What is 2 + 2?"},
                ],
                "tools": [tool],
                "temperature": 0.3,
            },
            "output": {"content": "4"},
        }
    )
    page = console.sign_in(route="#/requests/req_rec-1")
    settled(page)
    page.get_by_role("link", name="Open in playground").click()
    settled(page)
    expect(page.get_by_role("link", name="From record req_rec-1")).to_be_visible()
    expect(page.get_by_label("Message 1", exact=True)).to_have_value("Be brief.")
    expect(page.get_by_label("Message 2", exact=True)).to_have_value("What is 2 + 2?")
    expect(page.get_by_label("Model", exact=True)).to_have_value("gpt-4o-mini")
    assert '"lookup"' in page.get_by_label("Tools (JSON)").input_value()
    assert json.loads(page.get_by_label("Parameters (JSON)").input_value()) == {"temperature": 0.3}

    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()
    assert [c["status"] for c in grid_cells(page)] == ["success"]
    page.get_by_label("Prompt name").fill("from-record")
    page.get_by_role("button", name="Save as new version").click()
    expect(page.get_by_text("Saved from-record v1 from run pg_")).to_be_visible()
    saved = client.get("/v1/prompts/from-record").json()["data"]
    assert saved["tools"] == [tool] and saved["source_run_id"].startswith("pg_")
    console.screenshot("playground-from-record", for_docs=False)
    assert console.errors == []


def test_a_text_prompt_runs_over_a_datasets_items_one_row_each(
    console: Console, client: httpx.Client
) -> None:
    post(
        client,
        "/v1/prompts",
        {"name": "forecast", "template": "The weather in {{city}}?", "model": "gpt-4o-mini"},
    )
    post(client, "/v1/datasets", {"name": "cities"})
    items = [{"id": c.lower(), "input_variables": {"city": c}} for c in ("Oslo", "Lima", "Pune")]
    post(client, "/v1/datasets/cities/items", {"items": items})
    page = console.sign_in(route="#/prompts/forecast")
    settled(page)
    page.get_by_role("link", name="Open in playground").first.click()
    settled(page)
    expect(page.get_by_label("Template")).to_have_value("The weather in {{city}}?")
    expect(page.get_by_label("city of row 1")).to_be_visible()
    page.get_by_label("Inputs", exact=True).select_option("dataset")
    page.get_by_label("Dataset", exact=True).fill("cities")
    page.get_by_label("Items").fill("2")
    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()
    cells = grid_cells(page)
    assert [(c["row"], c["status"]) for c in cells] == [("0", "success"), ("1", "success")]
    assert page.locator(".playground-grid tbody th").all_inner_texts() == ["item oslo", "item lima"]
    assert console.errors == []


def test_a_max_cost_below_the_estimate_refuses_the_run_before_any_call_and_shows_the_estimate(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    make_greeting(client)
    page = console.sign_in(route="#/playground?prompt=greeting&version=1")
    settled(page)
    page.get_by_label("name of row 1").fill("Ada")
    page.get_by_label("Max cost of a run, USD (optional)").fill("0.000001")
    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()
    cell = page.locator("td.grid-cell")
    expect(cell).to_have_attribute("data-status", "error")
    expect(cell).to_contain_text("above the max cost: nothing was called")
    expect(cell).to_contain_text("Estimated at $0.0")
    assert openai_stub.calls == []
    listed = client.get("/v1/requests", params={"environment": "promptrail-playground"})
    assert listed.json()["data"] == []
    # The browser reports the refused request itself; the page raised nothing.
    assert [e for e in console.errors if "status of 402" not in e] == []


def test_a_viewer_is_offered_no_playground_and_a_member_no_connections(
    browser: Browser, team_url: str
) -> None:
    admin = signed_in(team_url, ADMIN_EMAIL, ADMIN_PASSWORD)
    post(
        admin,
        "/v1/prompts",
        {"name": "greeting", "type": "chat", "messages": MESSAGES, "model": "gpt-4o-mini"},
    )
    add_person(admin, "vera@example.com", "viewer")
    add_person(admin, "mo@example.com", "member")
    for tab in new_tab(browser, team_url):
        page = password_sign_in(tab, "vera@example.com", route="#/prompts/greeting")
        sections = page.locator("#nav a").all_inner_texts()
        assert "Playground" not in sections and "Settings" not in sections
        expect(page.get_by_role("heading", name="Labels")).to_be_visible()
        expect(page.get_by_role("link", name="Open in playground")).to_have_count(0)
    for tab in new_tab(browser, team_url):
        page = password_sign_in(tab, "mo@example.com", route="#/prompts/greeting")
        sections = page.locator("#nav a").all_inner_texts()
        assert "Playground" in sections and "Settings" not in sections
        expect(page.get_by_role("link", name="Open in playground").first).to_be_visible()
    admin.close()


def test_each_cell_shows_its_output_while_it_streams(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    make_greeting(client)
    openai_stub.script.reply = "one two three four five six"
    openai_stub.script.chunk_delay = 0.4
    page = console.sign_in(route="#/playground?prompt=greeting&version=1")
    settled(page)
    page.get_by_label("name of row 1").fill("Ada")
    page.get_by_role("button", name="Run all").click()
    cell = page.locator("td.grid-cell")
    # Part of the answer is shown before the cell ends.
    expect(cell).to_have_attribute("data-status", "streaming")
    assert "one" in cell.locator(".cell-output").inner_text()
    expect(cell).to_have_attribute("data-status", "success")
    expect(cell.locator(".cell-output")).to_have_text("one two three four five six")
    assert console.errors == []


def test_the_estimate_shows_before_any_run_and_follows_the_grid(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    make_greeting(client)
    page = console.sign_in(route="#/playground?prompt=greeting&version=1")
    settled(page)
    preview = page.locator(".pg-preview")
    # A row without its variable would be refused: the page says so and asks nothing.
    expect(preview).to_contain_text("fill every row's variables")
    page.get_by_label("name of row 1").fill("Ada")
    expect(preview).to_contain_text("Estimate before running: $")
    expect(preview).to_contain_text("for 1 cell in 1 run (tiktoken")
    one_cell = preview.locator(".pg-preview-cost").inner_text()
    # Another column and another row: recomputed, a run per row (its models at once).
    page.get_by_role("button", name="Add column").click()
    page.get_by_label("Model of column 2").fill("gpt-4o")
    page.get_by_role("button", name="Add row").click()
    page.get_by_label("name of row 2").fill("Grace")
    expect(preview).to_contain_text("for 4 cells in 2 runs")
    estimated = preview.locator(".pg-preview-cost").inner_text()
    assert estimated != one_cell
    # Nothing was called or logged for it.
    assert openai_stub.calls == []
    listed = client.get("/v1/requests", params={"environment": "all"})
    assert listed.json()["data"] == []
    # The runs then report the same estimate from their start events.
    page.get_by_role("button", name="Run all").click()
    expect(page.get_by_text("Done.")).to_be_visible()
    expect(page.locator(".pg-status .pg-estimate")).to_have_text(estimated)
    assert len(openai_stub.calls) == 4
    assert console.errors == []
