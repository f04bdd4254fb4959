"""What the console could not do (issue 47, point 10): score a whole trace from its page, give an
LLM judge its categories in the experiment form, edit a dataset item in place; and an experiment
result that carries an error (a judge that could not run) says so in the results."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from .conftest import PHONE, Console, expect
from .records import record
from .steps import fits, post, settled

if TYPE_CHECKING:
    from playwright.sync_api import Route

Log = Callable[..., None]
TRACE = "7d3f9a2c4b1e48d6a0c5e9f1b2d3c4e5"


def test_a_trace_is_scored_from_its_page(console: Console, log: Log, client: httpx.Client) -> None:
    log(
        record(1, trace_id=TRACE, span_id="00000000000000c1", span_name="answer"),
        record(2, trace_id=TRACE, span_id="00000000000000c2", parent_span_id="00000000000000c1"),
    )
    post(client, "/v1/scores", {"request_id": "req_console_0002", "name": "tone", "value": 0.5})
    page = settled(console.sign_in(route=f"#/traces/{TRACE}"))
    card = page.locator("section.scores-card")
    # The means over the trace and its records, then the trace's own scores (none yet).
    expect(card.locator(".score-means .badge")).to_have_text(["tone 0.5"])
    expect(card.get_by_text("No scores yet.")).to_be_visible()

    page.get_by_label("Score name").fill("resolved")
    page.get_by_label("▼ Bad").check()
    page.get_by_label("Comment").fill("the customer wrote again")
    page.get_by_role("button", name="Save score").click()
    expect(card.get_by_role("status")).to_have_text("Saved resolved false.")
    expect(card.locator("li.score-item .badge")).to_have_text(["resolved false"])
    # Every score listed here is on the trace: the list does not say so item by item.
    expect(card.locator("li.score-item")).not_to_contain_text("on the trace")

    # The score judges the trace, not one of its records.
    stored = client.get("/v1/scores", params={"trace_id": TRACE}).json()["data"]
    assert [(s["name"], s["value"], s["request_id"], s["source"]) for s in stored] == [
        ("resolved", False, None, "annotation")
    ]
    assert stored[0]["comment"] == "the customer wrote again"
    # Read again, the page lists it among the trace's scores and in the means.
    page.reload()
    settled(page)
    expect(card.locator("li.score-item .badge")).to_have_text(["resolved false"])
    expect(card.locator(".score-means .badge")).to_have_text(["resolved false", "tone 0.5"])
    console.screenshot("trace-scores")
    page.set_viewport_size(PHONE)
    assert fits(page)
    console.screenshot("trace-scores-phone")
    assert console.errors == []


def test_the_experiment_form_gives_a_judge_its_categories(
    console: Console, client: httpx.Client
) -> None:
    post(client, "/v1/prompts", {"name": "greeting", "template": "Hi {name}.", "model": "gpt-4o"})
    judge = "Is {output} polite for {input}? Answer polite or rude."
    post(client, "/v1/prompts", {"name": "politeness", "template": judge, "model": "gpt-4o"})
    post(client, "/v1/datasets", {"name": "people"})
    post(client, "/v1/datasets/people/items", {"items": [{"id": "ada", "input_variables": {}}]})
    page = settled(console.sign_in(route="#/prompts/greeting"))
    # What the form sends, caught on its way to the API (and passed on).
    sent: list[dict[str, Any]] = []

    def keep(route: Route) -> None:
        if route.request.method == "POST":
            sent.append(json.loads(route.request.post_data or "{}"))
        route.continue_()

    page.route(re.compile(r".*/v1/experiments$"), keep)
    form = page.get_by_role("form", name="Run over a dataset")
    form.get_by_label("Exact match").uncheck()
    form.get_by_label("Similarity to the expected answer").uncheck()

    # Categories without a judge, or not a map of name to number, are said on the form.
    form.get_by_label("Judge categories").fill("polite=1, rude=0")
    form.get_by_role("button", name="Run over the dataset").click()
    expect(form.get_by_role("alert")).to_have_text("Name the judge prompt its categories are for.")
    form.get_by_label("LLM judge").fill("politeness")
    form.get_by_label("Judge categories").fill("polite=1, rude=very")
    form.get_by_role("button", name="Run over the dataset").click()
    expect(form.get_by_role("alert")).to_have_text(
        "Judge categories: rude's value is not a number."
    )
    assert sent == []

    form.get_by_label("Judge categories").fill("polite = 1, rude: 0")
    form.get_by_role("button", name="Run over the dataset").click()
    expect(page).to_have_url(re.compile(r"#/experiments/exp_"))
    assert sent[0]["evaluators"] == [
        {"type": "llm_judge", "prompt": "politeness", "categories": {"polite": 1, "rude": 0}}
    ]
    made = client.get("/v1/experiments").json()["data"][0]
    assert [(e["type"], e["categories"]) for e in made["evaluators"]] == [
        ("llm_judge", {"polite": 1, "rude": 0})
    ]


def test_a_dataset_item_is_edited_in_place(console: Console, client: httpx.Client) -> None:
    post(client, "/v1/datasets", {"name": "hard-cases"})
    items = [
        {"id": "ada", "input_variables": {"name": "Ada"}, "expected_output": "Hello Ada.",
         "metadata": {"source_request_id": "req_1"}},
        {"id": "bob", "input_variables": {"name": "Bob"}, "expected_output": {"intent": "refund"}},
    ]  # fmt: skip
    post(client, "/v1/datasets/hard-cases/items", {"items": items})
    page = settled(console.sign_in(route="#/datasets/hard-cases"))
    cards = page.locator("ol.items > li")
    expect(cards).to_have_count(2)

    cards.first.get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Edit item ada")
    expect(form.get_by_label("Input variables")).to_be_focused()
    # Not a JSON object: said, nothing sent.
    form.get_by_label("Input variables").fill('["Ada"]')
    form.get_by_role("button", name="Save item").click()
    expect(form.get_by_role("alert")).to_have_text("Input variables must be a JSON object.")
    form.get_by_label("Input variables").fill('{"name": "Ada Lovelace"}')
    form.get_by_label("Expected output").fill("Hello Ada Lovelace.")
    form.get_by_role("button", name="Save item").click()
    expect(form).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text("Saved item ada.")
    expect(cards.first.locator("pre").first).to_contain_text('"name": "Ada Lovelace"')
    expect(cards.first.locator("pre.output")).to_have_text("Hello Ada Lovelace.")

    # An object expected output is edited as JSON and stays an object; Cancel changes nothing.
    cards.nth(1).get_by_role("button", name="Edit").click()
    form = page.get_by_role("form", name="Edit item bob")
    expect(form.get_by_label("Expected output")).to_have_value('{\n  "intent": "refund"\n}')
    form.get_by_label("Expected output").fill('{"intent": "cancel"}')
    console.screenshot("dataset-item-edit")
    form.get_by_role("button", name="Save item").click()
    expect(form).to_have_count(0)
    cards.nth(1).get_by_role("button", name="Edit").click()
    page.get_by_role("form", name="Edit item bob").get_by_label("Expected output").fill("")
    page.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("form")).to_have_count(0)

    stored = client.get("/v1/datasets/hard-cases/items").json()["data"]
    assert [(i["id"], i["input_variables"], i["expected_output"]) for i in stored] == [
        ("ada", {"name": "Ada Lovelace"}, "Hello Ada Lovelace."),
        ("bob", {"name": "Bob"}, {"intent": "cancel"}),
    ]
    # The item is replaced, not added, and keeps its metadata.
    assert stored[0]["metadata"] == {"source_request_id": "req_1"}
    page.reload()
    expect(settled(page).locator("ol.items > li")).to_have_count(2)
    assert console.errors == []


def test_a_results_error_shows_in_the_results(console: Console, client: httpx.Client) -> None:
    post(client, "/v1/datasets", {"name": "qa"})
    items = [{"id": q, "input_variables": {"q": q}} for q in ("q1", "q2")]
    post(client, "/v1/datasets/qa/items", {"items": items})
    made = post(client, "/v1/experiments", {"dataset": "qa", "task": "client", "name": "judged"})
    judge_error = "judge politeness: the prompt uses {tone}, which a judge is not given"
    results = [
        {"item_id": "q1", "output": "fine", "scores": {}, "error": judge_error},
        {"item_id": "q2", "status": "error", "error": "provider timed out"},
    ]
    stored = post(client, f"/v1/experiments/{made['id']}/results", {"results": results})
    assert stored["rejected"] == []
    post(client, f"/v1/experiments/{made['id']}/complete", {}, status=200)

    page = settled(console.sign_in(route=f"#/experiments/{made['id']}"))
    cards = page.locator("ol.results-list > li")
    expect(cards).to_have_count(2)
    expect(cards.first.locator(".result-error")).to_contain_text("Evaluator error")
    expect(cards.first.locator(".result-error pre.error")).to_have_text(judge_error)
    expect(cards.nth(1).locator(".result-error h3")).to_have_text("Error")
    expect(cards.nth(1).locator(".result-error pre.error")).to_have_text("provider timed out")
    console.screenshot("experiment-result-errors")
    assert console.errors == []
