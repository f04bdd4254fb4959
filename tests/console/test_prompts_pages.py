"""The prompt registry in the console: list, create, edit, diff, labels, rollback, run."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from promptrail.testing import OpenAIStub

from .conftest import Console, expect
from .steps import create, run_panel

if TYPE_CHECKING:
    from playwright.sync_api import Page


def update(client: httpx.Client, name: str, **fields: Any) -> None:
    response = client.patch(f"/v1/prompts/{name}", json=fields)
    assert response.status_code == 200, response.text


def settled(page: Page) -> None:
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")


def labels_shown(page: Page) -> dict[str, str]:
    settled(page)
    rows = page.locator("table.labels tr").evaluate_all(
        "rows => rows.map(r => [r.cells[0].innerText.trim(), r.cells[1].innerText.trim()])"
    )
    return dict(rows)


def diff_rows(page: Page, section: str) -> list[list[str]]:
    table = page.locator("section.card", has=page.get_by_role("heading", name=section))
    rows = table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [r.className, r.cells[1].innerText, r.cells[3].innerText])"
    )
    return [list(row) for row in rows]


def test_the_list_filters_prompts_by_search_folder_and_tags(
    console: Console, client: httpx.Client
) -> None:
    create(
        client,
        "support-reply",
        "Answer {question}.",
        folder="/support",
        tags=["email"],
        description="Replies to customers",
    )
    create(
        client,
        "summarize-ticket",
        "Summarize {ticket}.",
        folder="/support",
        tags=["internal"],
        description="One-line ticket summaries",
    )
    create(client, "classify-intent", "Classify {message}.", folder="/routing", tags=["email"])
    page = console.sign_in(route="#/prompts")

    def names(**filters: str) -> list[str]:
        for field, label in (("search", "Search"), ("folder", "Folder"), ("tags", "Tags")):
            page.get_by_label(label, exact=True).fill(filters.get(field, ""))
        page.get_by_role("button", name="Apply").click()
        settled(page)
        return page.locator("table.records tbody td:first-child").all_inner_texts()

    settled(page)
    expect(page.get_by_role("status")).to_have_text("3 of 3 prompts shown.")
    console.screenshot("prompts")
    assert names(folder="/support") == ["summarize-ticket", "support-reply"]
    assert names(tags="email") == ["classify-intent", "support-reply"]
    assert names(folder="/support", tags="email") == ["support-reply"]
    assert names(search="summar") == ["summarize-ticket"]
    assert names(search="nothing like it") == []
    expect(page.get_by_role("status")).to_have_text("No prompts match.")


def test_create_a_prompt_edit_it_and_compare_the_two_versions(
    console: Console, client: httpx.Client
) -> None:
    page = console.sign_in(route="#/prompts")
    page.get_by_role("link", name="New prompt").click()
    page.get_by_label("Name").fill("greeting")
    page.get_by_label("Template").fill("Say hello to {name}.\nKeep it short.")
    page.get_by_label("Model").fill("gpt-4o-mini")
    page.get_by_label("Parameters (JSON)").fill('{"temperature": 0.2')
    page.get_by_label("Labels for this version").fill("staging")
    page.get_by_role("button", name="Create prompt").click()
    expect(page.get_by_role("alert")).to_contain_text("Parameters are not JSON")

    page.get_by_label("Parameters (JSON)").fill('{"temperature": 0.2}')
    page.get_by_label("Description").fill("Greets a customer")
    page.get_by_label("Tags").fill("greet, short")
    page.get_by_label("Folder").fill("/support")
    page.get_by_role("button", name="Create prompt").click()

    expect(page.get_by_role("heading", name="greeting")).to_be_visible()
    expect(page.get_by_role("heading", name="Version 1")).to_be_visible()
    assert labels_shown(page) == {"staging": "v1"}

    page.get_by_role("link", name="Edit").click()
    template = page.get_by_label("Template")
    expect(template).to_have_value("Say hello to {name}.\nKeep it short.")
    template.fill("Say hi to {name}.\nKeep it short.\nSign as Promptrail.")
    page.get_by_label("Parameters (JSON)").fill('{"temperature": 0.5}')
    # Description, tags and folder are shown as they are; what the form holds is saved.
    expect(page.get_by_label("Description")).to_have_value("Greets a customer")
    expect(page.get_by_label("Tags")).to_have_value("greet, short")
    expect(page.get_by_label("Folder")).to_have_value("/support")
    page.get_by_label("Tags").fill("greet")
    page.get_by_label("Folder").fill("")
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_role("heading", name="Version 2")).to_be_visible()
    saved = client.get("/v1/prompts/greeting").json()["data"]
    assert (saved["description"], saved["tags"], saved["folder"]) == (
        "Greets a customer",
        ["greet"],
        None,
    )

    settled(page)
    page.get_by_label("Version", exact=True).select_option("1")
    page.get_by_label("with").select_option("2")
    page.get_by_role("button", name="Show diff").click()

    expect(page.get_by_role("heading", name="greeting: v1 → v2")).to_be_visible()
    assert diff_rows(page, "Template") == [
        ["change", "Say hello to {name}.", "Say hi to {name}."],
        ["same", "Keep it short.", "Keep it short."],
        ["add", "", "Sign as Promptrail."],
    ]
    assert ["change", '  "temperature": 0.2', '  "temperature": 0.5'] in diff_rows(
        page, "Parameters"
    )
    assert diff_rows(page, "Model") == [["same", "gpt-4o-mini", "gpt-4o-mini"]]
    # Inside a changed line, the words that changed are marked on each side.
    template = page.locator("section.card", has=page.get_by_role("heading", name="Template"))
    assert template.locator("tr.change del").all_inner_texts() == ["hello"]
    assert template.locator("tr.change ins").all_inner_texts() == ["hi"]
    assert template.locator("tr.same del, tr.same ins, tr.add ins").count() == 0
    console.screenshot("prompt-diff")
    # In both schemes a marked word stands out from its changed line's background.
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for mark, cell in (("del", "td.left"), ("ins", "td.right")):
            word, line = (
                template.locator(f"tr.change {selector}").first.evaluate(
                    "el => getComputedStyle(el).backgroundColor"
                )
                for selector in (mark, cell)
            )
            assert word != line, (scheme, mark)
    console.screenshot("prompt-diff-dark")


def test_a_second_prompt_with_a_taken_name_is_refused_with_the_reason(
    console: Console, client: httpx.Client
) -> None:
    create(client, "greeting", "Hello {name}.")
    page = console.sign_in(route="#/prompts/+new")
    page.get_by_label("Name").fill("greeting")
    page.get_by_label("Template").fill("Hi {name}.")
    page.get_by_label("Model").fill("gpt-4o-mini")
    page.get_by_role("button", name="Create prompt").click()

    expect(page.get_by_role("alert")).to_contain_text("PROMPT_ALREADY_EXISTS")


def test_labels_attach_move_and_remove_and_a_rollback_makes_a_new_version(
    console: Console, client: httpx.Client
) -> None:
    create(client, "greeting", "Hello {name}.", labels=["staging"])
    update(client, "greeting", template="Hi {name}!")
    page = console.sign_in(route="#/prompts/greeting")
    assert labels_shown(page) == {"staging": "v1"}

    page.get_by_label("Label", exact=True).fill("production")
    page.get_by_label("on", exact=True).select_option("1")
    page.get_by_role("button", name="Attach").click()
    expect(page.locator("table.labels")).to_contain_text("production")
    assert labels_shown(page) == {"production": "v1", "staging": "v1"}

    page.get_by_label("Move production to").select_option("2")
    page.get_by_role("button", name="Move production", exact=True).click()
    expect(page.locator("table.labels tr", has_text="production")).to_contain_text("v2")
    page.get_by_role("button", name="Remove staging").click()
    expect(page.locator("table.labels")).not_to_contain_text("staging")
    assert labels_shown(page) == {"production": "v2"}
    served = client.get("/v1/prompts/greeting/versions/by-label/production/template").json()
    assert served["version"] == 2

    page.get_by_role("button", name="Roll back to v1").click()

    expect(page.get_by_role("heading", name="Version 3")).to_be_visible()
    expect(page.locator("pre.template")).to_have_text("Hello {name}.")
    newest = page.locator("table.versions tbody tr").first
    expect(newest).to_contain_text("v3")
    expect(newest).to_contain_text("1")
    console.screenshot("prompt")


def test_the_run_panel_fills_the_variables_and_streams_the_output(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Hello Ada, nice to meet you."
    create(client, "greeting", "Say hello to {name} from {city}.")
    page = console.sign_in(route="#/prompts/greeting")
    run = page.get_by_role("form", name="Run this prompt")
    expect(run.locator("label")).to_have_text(["name", "city", "User input (optional)"])

    run.get_by_label("name").fill("Ada")
    run.get_by_label("city").fill("<b>London</b>")
    run.get_by_role("button", name="Run").click()

    expect(run.locator("pre.run-output")).to_have_text("Hello Ada, nice to meet you.")
    expect(run.get_by_role("status")).to_contain_text("Done:")
    sent = openai_stub.calls[-1].body
    assert sent["stream"] is True
    assert sent["messages"][-1]["content"] == "Say hello to Ada from <b>London</b>."
    logged = client.get("/v1/requests", params={"prompt_name": "greeting"}).json()["data"]
    assert [record["output"]["content"] for record in logged] == ["Hello Ada, nice to meet you."]


def test_a_blank_variable_is_named_before_running_and_empty_must_be_asked_for(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Hello there."
    page, run = run_panel(console, client, "Say a warm hello to {name}, who works on {team}.")

    run.get_by_label("name", exact=True).fill("Ada")
    run.get_by_label("team", exact=True).fill("   ")
    run.get_by_role("button", name="Run").click()
    expect(run.get_by_role("alert")).to_have_text(
        "Fill in team, or tick its “send empty” box to send an empty value. Nothing was run."
    )
    assert openai_stub.calls == []
    assert client.get("/v1/requests").json()["data"] == []

    team = run.locator(".field", has=page.get_by_label("team", exact=True))
    team.get_by_role("checkbox", name="empty value").check()
    run.get_by_role("button", name="Run").click()
    expect(run.get_by_role("status")).to_contain_text("Done:")
    assert openai_stub.calls[-1].body["messages"][-1]["content"] == (
        "Say a warm hello to Ada, who works on ."
    )

    # The answer links to the run's record.
    record_id = client.get("/v1/requests").json()["data"][0]["id"]
    link = run.get_by_role("link", name="See the record")
    assert link.get_attribute("href") == f"#/requests/{record_id}"
    link.click()
    expect(page.get_by_text(record_id, exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="greeting")).to_be_visible()


def test_the_prompt_page_shows_the_versions_own_creation_time(
    console: Console, client: httpx.Client
) -> None:
    create(client, "greeting", "Hello {name}.")
    first = client.get("/v1/prompts/greeting").json()["data"]["created_at"]
    # The second version must be made in a later second than the first to tell them apart.
    while datetime.now(UTC).replace(microsecond=0) <= datetime.fromisoformat(first):
        time.sleep(0.05)
    update(client, "greeting", template="Hi {name}!")
    versions = client.get("/v1/prompts/greeting/versions").json()["data"]
    second = next(v["created_at"] for v in versions if v["version"] == 2)

    page = console.sign_in(route="#/prompts/greeting")
    shown = page.locator("section.card", has=page.get_by_role("heading", name="Version 2"))
    created = shown.locator("dt", has_text="Created (UTC)").locator(
        "xpath=following-sibling::dd[1]"
    )
    expect(created).to_have_text(datetime.fromisoformat(second).strftime("%Y-%m-%d %H:%M:%S"))
    assert created.inner_text() != datetime.fromisoformat(first).strftime("%Y-%m-%d %H:%M:%S")


def test_the_version_history_shows_a_page_and_loads_more(
    console: Console, client: httpx.Client
) -> None:
    # Issue 35: the versions list is paged; the history shows the newest 50, "Load more" the rest.
    create(client, "long", "v1")
    for n in range(2, 56):
        update(client, "long", template=f"v{n}")
    client.put("/v1/prompts/long/labels/production", json={"version": 1})

    page = console.sign_in(route="#/prompts/long")
    rows = page.locator("table.versions tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first.locator("td").first).to_have_text("v55")
    # The label on a version past the first page is still shown as where it points.
    expect(page.locator("#move-production")).to_have_value("1")
    page.get_by_role("button", name="Load more").click()

    expect(rows).to_have_count(55)
    expect(rows.last.locator("td").first).to_have_text("v1")
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()
    expect(page.get_by_text("55 versions")).to_be_visible()
