"""Datasets and experiments in the console (issue 33, point 6): records added to a dataset from
the request log's filters and from one record, a prompt's version run over a dataset from the
prompt's page (status and counts while it runs, then results with scores), and the comparison of
two experiments (deltas with intervals, regressions first, a word-level diff of the outputs).
Everything goes through the public API of a live collector; the runs go to the OpenAI stub."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from promptrail.testing import OpenAIStub

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record
from .steps import fits, post, settled

Log = Callable[..., None]
MINUS = "\u2212"  # the console writes negative deltas with a real minus sign
# No quotes in it: shown as JSON (variables), it reads the same.
HOSTILE = "<img src=x onerror=window.pwned=1>"


def items_of(client: httpx.Client, dataset: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/datasets/{dataset}/items", params={"limit": 100})
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def test_records_from_the_logs_filter_and_from_one_record_make_a_dataset(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(
        record(1, input_variables={"customer": HOSTILE, "question": "Where is my order?"}),
        record(2, created_at="2026-11-23T09:15:00Z", status="error", error="timeout", output=None),
        record(3, created_at="2026-11-22T09:15:00Z", prompt_name="classify-intent"),
    )
    page = settled(console.sign_in(route="#/requests?prompt_name=support-reply&status=success"))
    expect(page.locator("table.records tbody tr")).to_have_count(1)

    # From the keyboard: the disclosure opens with Enter, the form sends with Enter.
    page.get_by_text("Add these requests to a dataset").focus()
    page.keyboard.press("Enter")
    form = page.get_by_role("form", name="Add these requests to a dataset")
    expect(form.get_by_label("Dataset")).to_be_focused()
    page.keyboard.type("hard-cases")
    page.keyboard.press("Enter")
    expect(form.get_by_role("status")).to_have_text("Added 1 record to hard-cases. Open hard-cases")
    # Only what the filters select: support-reply's successful record, its output expected.
    items = items_of(client, "hard-cases")
    assert [(i["id"], i["source_request_id"]) for i in items] == [
        ("req_console_0001", "req_console_0001")
    ]
    assert items[0]["input_variables"]["customer"] == HOSTILE
    assert items[0]["expected_output"] == "Hello Ada, your order ships today."

    # Adding the same records again makes no second item (the item's id is the record's).
    form.get_by_role("button", name="Add to dataset").click()
    expect(form.get_by_role("status")).to_have_text("Added 1 record to hard-cases. Open hard-cases")
    assert len(items_of(client, "hard-cases")) == 1
    console.screenshot("requests-add-to-dataset")

    # One record from its detail, into the same dataset (the name is suggested).
    page.goto(f"{console.url}/#/requests/req_console_0003")
    card = settled(page).get_by_role("form", name="Add this record to a dataset")
    # The suggestions arrive with the project's datasets, after the page itself.
    expect(card.locator("datalist option")).to_have_count(1)
    assert card.locator("datalist option").evaluate_all("os => os.map(o => o.value)") == [
        "hard-cases"
    ]
    card.get_by_label("Dataset").fill("hard-cases")
    card.get_by_label("Its output as the expected answer").uncheck()
    card.get_by_role("button", name="Add").click()
    expect(card.get_by_role("status")).to_have_text("Added to hard-cases. Open hard-cases")
    items = items_of(client, "hard-cases")
    assert [i["id"] for i in items] == ["req_console_0001", "req_console_0003"]
    assert items[1]["expected_output"] is None
    assert items[1]["metadata"] == {"source_request_id": "req_console_0003"}

    # The datasets page and the items, the hostile variable shown as text.
    page.get_by_role("link", name="Datasets", exact=True).click()
    rows = settled(page).locator("table.records tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td").nth(0)).to_have_text("hard-cases")
    expect(rows.first.locator("td").nth(2)).to_have_text("2")
    console.screenshot("datasets")
    rows.first.get_by_role("link", name="hard-cases").click()
    cards = settled(page).locator("ol.items > li")
    expect(cards).to_have_count(2)
    expect(cards.first.locator("pre").first).to_contain_text(HOSTILE)
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.pwned") is None
    console.screenshot("dataset-items")
    page.set_viewport_size(PHONE)
    assert fits(page)
    console.screenshot("dataset-items-phone")

    # An item removed from the dataset's page is gone from the API.
    cards.nth(1).get_by_role("button", name="Remove").click()
    expect(cards).to_have_count(1)
    assert [i["id"] for i in items_of(client, "hard-cases")] == ["req_console_0001"]
    assert console.errors == []


def test_a_version_runs_over_a_dataset_from_the_prompts_page(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    post(
        client,
        "/v1/prompts",
        {"name": "greeting", "template": "Say hello to {name}.", "model": "gpt-4o-mini"},
    )
    post(client, "/v1/datasets", {"name": "people"})
    items = [
        {"id": "ada", "input_variables": {"name": "Ada"}, "expected_output": "Hello Ada."},
        {"id": "bob", "input_variables": {"name": HOSTILE}, "expected_output": "Hi Bob."},
        {"id": "cy", "input_variables": {"name": "Cy"}, "expected_output": "Hello Ada."},
    ]
    post(client, "/v1/datasets/people/items", {"items": items})
    openai_stub.script.reply = "Hello Ada."
    # Slow enough that the page shows the experiment running before it completes.
    openai_stub.script.first_byte_delay = 1.0

    page = settled(console.sign_in(route="#/prompts/greeting"))
    form = page.get_by_role("form", name="Run over a dataset")
    expect(form.get_by_label("Dataset")).to_have_value("people")
    expect(form.get_by_label("Version")).to_have_value("1")
    form.get_by_label("Concurrency").fill("1")
    form.get_by_label("Valid JSON").check()
    # A regex that does not compile is the API's error, said on the form; nothing starts.
    form.get_by_label("Regex").fill("(unclosed")
    form.get_by_role("button", name="Run over the dataset").click()
    expect(form.get_by_role("alert")).to_contain_text("(VALIDATION_ERROR)")
    assert openai_stub.calls == []
    assert client.get("/v1/experiments").json()["data"] == []
    form.get_by_label("Regex").fill("")
    form.get_by_role("button", name="Run over the dataset").click()

    expect(page).to_have_url(re.compile(r"#/experiments/exp_"))
    head = page.locator("h1")
    expect(head.locator(".badge")).to_have_text("running")
    expect(page.get_by_role("progressbar", name="Runs done")).to_be_visible()
    expect(head.locator(".badge")).to_have_text("completed", timeout=30_000)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    run = page.locator("section.card", has=page.get_by_role("heading", name="Run"))
    expect(run).to_contain_text("3 / 3 runs")
    expect(run).to_contain_text("greeting v1")

    results = page.locator("ol.results-list > li")
    expect(results).to_have_count(3)
    assert results.evaluate_all("cs => cs.map(c => c.dataset.itemId)") == ["ada", "bob", "cy"]
    expect(results.first.locator("pre.output")).to_have_text("Hello Ada.")
    badges = results.evaluate_all(
        "cs => cs.map(c => [...c.querySelectorAll('.badge.score')].map(b => b.innerText))"
    )
    assert [b[:2] for b in badges] == [
        ["exact_match true", "json_valid false"],
        ["exact_match false", "json_valid false"],
        ["exact_match true", "json_valid false"],
    ]
    # The hostile variable went to the provider as the item held it and shows as text.
    sent = [call.body["messages"][-1]["content"] for call in openai_stub.calls]
    assert f"Say hello to {HOSTILE}." in sent
    expect(results.nth(1).locator("pre").first).to_contain_text(HOSTILE)
    assert page.locator("main img").count() == 0

    summary = page.locator("section.card", has=page.get_by_role("heading", name="Summary"))
    rows = summary.locator("table.summary-scores tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )
    names = [row[0] for row in rows]
    assert names == ["exact_match", "json_valid", "similarity"]
    exact = rows[0]
    # Mean 2/3 with a t-based interval around it, over 3 results.
    assert re.fullmatch(rf"0\.667 \[{MINUS}?[0-9.]+, [0-9.]+\]", exact[1]), exact
    assert exact[2] == "3"
    console.screenshot("experiment")
    page.set_viewport_size(PHONE)
    assert fits(page)
    # The one refused request, the bad regex's: the browser logs the 400 it answered.
    assert console.errors == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]


def client_experiment(
    client: httpx.Client, name: str, outputs: dict[str, tuple[str, float]]
) -> str:
    """A client experiment over dataset "qa": item -> (output, correct)."""
    made = post(client, "/v1/experiments", {"dataset": "qa", "task": "client", "name": name})
    results = [
        {"item_id": item, "output": output, "scores": {"correct": value},
         "latency_ms": 100 + 10 * n, "estimated_cost_usd": 0.001}
        for n, (item, (output, value)) in enumerate(outputs.items())
    ]  # fmt: skip
    post(client, f"/v1/experiments/{made['id']}/results", {"results": results})
    post(client, f"/v1/experiments/{made['id']}/complete", {}, status=200)
    return str(made["id"])


BASE = {
    "q1": ("Your order ships today.", 1.0),
    "q2": ("Refunds take five days.", 1.0),
    "q3": ("We open at nine.", 0.0),
    "q4": (f"Reset it from settings {HOSTILE}.", 0.5),
}
CANDIDATE = {
    "q1": ("Your order ships tomorrow.", 0.0),
    "q2": ("Refunds take five days.", 1.0),
    "q3": ("We open at nine every day.", 1.0),
    "q4": (f"Reset it from the settings page {HOSTILE}.", 0.25),
}


def test_the_comparison_shows_regressions_first_with_intervals_and_the_changed_words(
    console: Console, client: httpx.Client
) -> None:
    post(client, "/v1/datasets", {"name": "qa"})
    post(
        client,
        "/v1/datasets/qa/items",
        {"items": [{"id": q, "input_variables": {"q": q}, "expected_output": "x"} for q in BASE]},
    )
    base = client_experiment(client, "v3 baseline", BASE)
    candidate = client_experiment(client, "v4 candidate", CANDIDATE)

    page = settled(console.sign_in(route="#/experiments"))
    rows = page.locator("table.records tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator("td").first).to_have_text("v4 candidate")
    console.screenshot("experiments")
    page.set_viewport_size(PHONE)
    assert fits(page)
    page.set_viewport_size(LAPTOP)
    # The picker proposes the newest as the candidate and the one before as the base.
    pick = page.get_by_role("form", name="Compare two experiments")
    expect(pick.get_by_label("Base")).to_have_value(base)
    expect(pick.get_by_label("Candidate")).to_have_value(candidate)
    pick.get_by_role("button", name="Compare").click()
    settled(page)
    expect(page).to_have_url(re.compile(r"#/experiments/compare\?base=exp_.*&candidate=exp_"))

    score = page.locator("section.card", has=page.get_by_role("heading", name="Scores"))
    cells = score.locator("tbody tr").first.locator("td").all_inner_texts()
    # Deltas -1, 0, +1, -0.25: mean -0.0625, an interval holding 0.
    assert cells[:4] == ["correct", "0.625", "0.563", f"{MINUS}0.063"]
    assert re.fullmatch(rf"\[{MINUS}[0-9.]+, \+[0-9.]+\]", cells[4]), cells[4]
    assert cells[5:] == ["no clear difference", "1", "2", "1"]
    money = page.locator("table.totals tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )
    assert money[0] == ["Cost", "$0.004", "$0.004", "$0"]
    assert money[1][0] == "Latency p50" and money[1][3] == "0 ms"

    items = page.locator("ol.compare-items > li")
    expect(items).to_have_count(4)
    # The largest regression first.
    assert items.evaluate_all("cs => cs.map(c => c.dataset.itemId)") == ["q1", "q4", "q2", "q3"]
    expect(items.first.locator(".badge.delta")).to_have_text(f"correct {MINUS}1")
    first = items.first.locator("table.diff tbody tr").first
    expect(first.locator("td.left del")).to_have_text("today.")
    expect(first.locator("td.right ins")).to_have_text("tomorrow.")
    # The hostile output is compared as text: no element of it reached the page.
    inserted = items.nth(1).locator("ins").all_inner_texts()
    assert [word for word in inserted if word.strip()] == ["the", "page"]
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.pwned") is None
    console.screenshot("experiment-compare")

    page.emulate_media(color_scheme="dark")
    console.screenshot("experiment-compare-dark")
    page.set_viewport_size(PHONE)
    assert fits(page)
    console.screenshot("experiment-compare-phone")
    page.set_viewport_size(LAPTOP)

    # Swapping the sides turns the regression into the improvement.
    page.get_by_role("link", name="Swap sides").click()
    settled(page)
    expect(page.locator("ol.compare-items > li").first).to_have_attribute("data-item-id", "q3")
    assert console.errors == []


def test_a_running_experiment_counts_up_and_can_be_cancelled(
    console: Console, client: httpx.Client, openai_stub: OpenAIStub
) -> None:
    post(
        client,
        "/v1/prompts",
        {"name": "greeting", "template": "Hi {name}.", "model": "gpt-4o-mini"},
    )
    post(client, "/v1/datasets", {"name": "many"})
    items = [{"id": f"p{n}", "input_variables": {"name": f"P{n}"}} for n in range(20)]
    post(client, "/v1/datasets/many/items", {"items": items})
    openai_stub.script.first_byte_delay = 0.5
    made = post(
        client,
        "/v1/experiments",
        {"dataset": "many", "prompt": "greeting", "evaluators": [], "concurrency": 1},
    )
    page = settled(console.sign_in(route=f"#/experiments/{made['id']}"))
    head = page.locator("h1")
    expect(head.locator(".badge")).to_have_text("running")
    run = page.locator("section.card", has=page.get_by_role("heading", name="Run"))
    # The page asks again while it runs: the count moves without a reload.
    progress = run.locator(".progress")
    first = progress.inner_text()
    expect(progress).not_to_have_text(first, timeout=10_000)
    expect(progress).to_have_text(re.compile(r"^[1-9]\d* / 20 runs$"))
    page.get_by_role("button", name="Cancel").click()
    expect(head.locator(".badge")).to_have_text("cancelled", timeout=10_000)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)
    stored = client.get(f"/v1/experiments/{made['id']}").json()["data"]
    assert stored["status"] == "cancelled" and stored["counts"]["done"] < 20
    assert console.errors == []
