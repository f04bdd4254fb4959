"""Online evaluation in the console (issue 50 point 5; docs/api-notes.md, "Online
evaluation"): an evaluator made and tried on records before it is saved, edited into a new
version; a rule made from the request list's filters with a preview of its mapping on a real
record; the worker deciding new records (a code evaluator: no provider); the rule's page with
its counts, chart and decisions; and the record's page answering "why wasn't this scored?".
A live collector, Debian's Chromium, laptop and phone width, light and dark."""

from __future__ import annotations

import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import serve
from tests.keys import DEFAULT_KEY

from .conftest import Console, expect
from .steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    add_person,
    both_looks,
    card,
    new_tab,
    password_sign_in,
    post,
    rows,
    settled,
    signed_in,
    team_settings,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser


# The worker looks for new records this often (at the product's 0.5 s each wait for decisions
# below waited for a pass up to half a second later).
POLL = 0.1


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The collector's settings with the worker looking every ``POLL`` seconds."""
    return settings.model_copy(update={"evaluation_poll_seconds": POLL})


def _record(rid: str, content: str) -> dict[str, Any]:
    return {
        "id": rid,
        "prompt_name": "greet",
        "model": "gpt-4o-mini",
        "status": "success",
        "input_variables": {"name": rid},
        "output": {"content": content},
    }


def _decisions(client: httpx.Client, rule_id: str, wanted: int) -> list[dict[str, Any]]:
    """The rule's decisions once ``wanted`` of them are final (the worker runs on its own)."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # polled: the worker reads arrivals half a second on
        response = client.get(f"/v1/evaluation-rules/{rule_id}/decisions")
        assert response.status_code == 200, response.text
        found = response.json()["data"]
        if len([d for d in found if d["decision"] != "waiting"]) >= wanted:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the worker decided only {found}")


def test_an_evaluator_is_tried_saved_and_a_rule_decides_new_records(
    console: Console, client: httpx.Client, log: Any
) -> None:
    log(_record("req_old_json", '{"ok": true}'), _record("req_old_text", "not json"))
    page = settled(console.sign_in(route="#/rules"))
    expect(page.get_by_role("heading", name="Evaluation rules")).to_be_visible()
    page.get_by_role("link", name="Evaluators", exact=True).click()
    expect(page.get_by_role("heading", name="Evaluators")).to_be_visible()
    section = page.locator("#nav").get_by_role("link", name="Evaluation")
    expect(section).to_have_attribute("aria-current", "page")
    page.get_by_role("link", name="New evaluator").click()

    # The form shows each type's own fields; tried on two records before anything is saved.
    page.get_by_label("Name", exact=True).fill("is-json")
    page.get_by_label("Type").select_option("regex")
    expect(page.get_by_label("Pattern")).to_be_visible()
    page.get_by_label("Type").select_option("json_valid")
    expect(page.get_by_label("Pattern")).to_be_hidden()
    page.get_by_label("Records").fill("req_old_json, req_old_text")
    page.get_by_role("button", name="Try on records").click()
    expect(page.locator("table.trial tbody tr")).to_have_count(2)
    assert [row[0::2] for row in rows(page)] == [
        ["req_old_json", "true"],
        ["req_old_text", "false"],
    ]
    assert client.get("/v1/evaluators").json()["data"] == []  # tried, not saved
    both_looks(console, page, "evaluator-new-tried")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("is-json")

    # An edit is a new version; the page lists both.
    page.get_by_label("Score name").fill("valid_json")
    page.get_by_role("button", name="Save").click()
    expect(card(page, "Versions").locator("li")).to_have_count(2)
    assert client.get("/v1/evaluators/is-json").json()["data"]["version"] == 2
    both_looks(console, page, "evaluator-page")

    # A rule from the request list's filters, its mapping previewed on a matching record.
    page.goto(f"{console.url}/#/rules/+new")
    page.get_by_label("Name", exact=True).fill("answers are JSON")
    page.get_by_label("Evaluator", exact=True).select_option("is-json")
    versions = page.get_by_label("Evaluator version").locator("option").all_inner_texts()
    assert versions == ["the newest", "v2", "v1"]
    page.get_by_label("Prompt", exact=True).fill("greet")
    page.get_by_label("Input", exact=True).fill("input_variables.name")
    page.get_by_label("Output", exact=True).fill("output.content")
    page.get_by_role("button", name="Preview on a matching record").click()
    preview = page.locator(".mapping-preview")
    expect(preview.locator("dl.mapped")).to_be_visible()
    newest = client.get("/v1/requests", params={"limit": 1}).json()["data"][0]["id"]
    expect(preview).to_contain_text(f"On record {newest}")
    expect(preview.locator("dd").nth(0)).to_have_text(newest)
    expect(preview.locator("table.trial tbody tr")).to_have_count(1)
    both_looks(console, page, "rule-new-preview")
    page.get_by_role("button", name="Create rule").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("answers are JSON")
    rule_id = page.url.rsplit("/", 1)[1]
    assert rule_id.startswith("rule_")
    skipped = post(
        client,
        "/v1/evaluation-rules",
        {"name": "sampled out", "evaluator": "is-json", "target": "record", "sampling": 0},
    )

    # New records are decided by the worker: scored by one rule, not sampled by the other.
    log(_record("req_new_json", '{"ok": true}'), _record("req_new_text", "oops"))
    decided = _decisions(client, rule_id, 2)
    assert {d["target_id"]: d["decision"] for d in decided} == {
        "req_new_json": "scored",
        "req_new_text": "scored",
    }
    _decisions(client, skipped["id"], 2)

    page.reload()
    settled(page)
    expect(card(page, "Last 24 hours")).to_contain_text("scored 2")
    expect(page.locator("svg.decisions-chart .segment.scored")).to_have_count(1)
    expect(page.locator("table.decisions tbody tr")).to_have_count(2)
    expect(page.locator("table.decisions")).to_contain_text("json_valid: False")
    both_looks(console, page, "rule-page")
    page.get_by_label("Show decisions").select_option("not_sampled")
    expect(page.get_by_role("status").filter(has_text="No decisions yet.")).to_be_visible()

    page.goto(f"{console.url}/#/rules")
    settled(page)
    listed = {row[0]: row for row in rows(page)}
    assert "scored 2" in listed["answers are JSON"][4]
    assert "not_sampled 2" in listed["sampled out"][4]
    both_looks(console, page, "rules-list")

    # The record's page says what each rule decided, and why not when it did not score.
    page.goto(f"{console.url}/#/requests/req_new_text")
    evaluations = card(page, "Evaluations")
    expect(evaluations.locator("li")).to_have_count(2)
    expect(evaluations).to_contain_text("json_valid: False")
    expect(evaluations.locator(".badge", has_text="not_sampled")).to_be_visible()
    # Each decision names its rule (read from the rules: a decision carries only its id).
    expect(evaluations.get_by_role("link", name="sampled out")).to_be_visible()
    expect(evaluations.get_by_role("link", name="answers are JSON")).to_be_visible()
    expect(evaluations).to_contain_text("sampling")
    both_looks(console, page, "record-evaluations")
    # A record no rule looked at (logged before the rules) says so.
    page.goto(f"{console.url}/#/requests/req_old_json")
    expect(card(page, "Evaluations")).to_contain_text("No evaluation rule has decided")

    # A backfill of today decides the records logged before the rule, as the live path does.
    first_day = client.get("/v1/requests/req_old_json").json()["data"]["created_at"][:10]
    page.goto(f"{console.url}/#/rules/{rule_id}")
    page.get_by_label("From", exact=True).fill(first_day)
    page.get_by_label("To", exact=True).fill(time.strftime("%Y-%m-%d", time.gmtime()))
    page.get_by_role("button", name="Start backfill").click()
    expect(page.locator("form.backfill")).to_contain_text("4 records to decide")
    assert len(_decisions(client, rule_id, 4)) == 4
    page.goto(f"{console.url}/#/requests/req_old_json")
    expect(card(page, "Evaluations")).to_contain_text("json_valid: True")

    # Deleting a rule (asked once) takes it off the list.
    page.goto(f"{console.url}/#/rules/{skipped['id']}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete rule").click()
    expect(page.get_by_role("heading", name="Evaluation rules")).to_be_visible()
    assert [row[0] for row in rows(page)] == ["answers are JSON"]
    assert console.errors == []


def test_a_trace_page_shows_its_evaluation_and_a_rule_is_edited_in_its_form(
    console: Console, client: httpx.Client, log: Any
) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    client.put("/v1/evaluators/is-json", json={"type": "json_valid"}).raise_for_status()
    rule = post(
        client,
        "/v1/evaluation-rules",
        {"name": "traces answer JSON", "evaluator": "is-json", "target": "trace",
         "idle_seconds": 0, "filter": {"model": "gpt-4o-mini"}},
    )  # fmt: skip
    log(
        {"id": "req_root", "trace_id": trace, "span_id": "a1a1a1a1a1a1a1a1", "kind": "chain",
         "span_name": "agent", "status": "success", "output": {"content": "hi"}},
        {"id": "req_call", "trace_id": trace, "span_id": "b1b1b1b1b1b1b1b1",
         "parent_span_id": "a1a1a1a1a1a1a1a1", "kind": "llm", "model": "gpt-4o-mini",
         "status": "success", "output": {"content": '{"answer": 42}'}},
    )  # fmt: skip
    (decision,) = _decisions(client, rule["id"], 1)
    assert (decision["target_type"], decision["decision"]) == ("trace", "scored")

    page = settled(console.sign_in(route=f"#/traces/{trace}"))
    evaluations = card(page, "Evaluations")
    expect(evaluations.locator(".badge", has_text="scored")).to_be_visible()
    expect(evaluations).to_contain_text("json_valid: True")
    both_looks(console, page, "trace-evaluations")

    # The rule's page leads to its form, prefilled; saving changes the rule (a PATCH).
    evaluations.get_by_role("link", name="traces answer JSON").click()
    expect(page.locator("table.decisions")).to_contain_text(f"trace {trace}")
    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_label("Model", exact=True)).to_have_value("gpt-4o-mini")
    expect(page.get_by_label("Target")).to_have_value("trace")
    # A label needs a prompt: the collector's 400 is shown, nothing changes.
    page.get_by_label("Label", exact=True).fill("production")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("filter.label")
    page.get_by_label("Label", exact=True).fill("")
    page.get_by_label("Enabled").uncheck()
    page.get_by_label("Sampling (0-1)").fill("0.5")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("disabled")
    changed = client.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"]
    assert (changed["enabled"], changed["sampling"], changed["filter"]) == (
        False,
        0.5,
        {"model": "gpt-4o-mini"},
    )
    # The browser reports the refused save (400), and nothing else went wrong.
    assert [error for error in console.errors if "status of 400" not in error] == []
    assert len(console.errors) == 1


def test_a_viewer_reads_rules_and_evaluators_but_is_offered_no_write_and_an_annotator_no_section(
    browser: Browser, settings: Settings
) -> None:
    with (
        serve(create_app(team_settings(settings))) as url,
        closing(signed_in(url, ADMIN_EMAIL, ADMIN_PASSWORD)) as admin,
        httpx.Client(base_url=url, headers={"X-API-Key": DEFAULT_KEY}, timeout=30) as app,
    ):
        app.put("/v1/evaluators/is-json", json={"type": "json_valid"}).raise_for_status()
        rule = post(
            app, "/v1/evaluation-rules", {"name": "r", "evaluator": "is-json", "target": "record"}
        )
        add_person(admin, "vera@example.com", "viewer")
        add_person(admin, "ann@example.com", "annotator")
        for viewer in new_tab(browser, url):
            page = password_sign_in(viewer, "vera@example.com", route="#/rules")
            expect(page.get_by_role("link", name="r", exact=True)).to_be_visible()
            expect(page.get_by_role("link", name="New rule")).to_have_count(0)
            page.goto(f"{url}/#/rules/{rule['id']}")
            expect(page.get_by_role("heading", name="Decisions", exact=True)).to_be_visible()
            expect(page.get_by_role("link", name="Edit", exact=True)).to_have_count(0)
            page.goto(f"{url}/#/evaluators")
            expect(page.get_by_role("link", name="is-json")).to_be_visible()
            expect(page.get_by_role("link", name="New evaluator")).to_have_count(0)
            page.get_by_role("link", name="is-json").click()
            expect(card(page, "Versions")).to_be_visible()
            expect(page.get_by_role("button", name="Save")).to_have_count(0)
            assert viewer.errors == []
        # An annotator reads no rules or evaluators: no Evaluation section. (Its request list's
        # environment picker is refused GET /v1/environments, so its errors are not checked.)
        for annotator in new_tab(browser, url):
            page = password_sign_in(annotator, "ann@example.com", route="#/requests")
            expect(page.locator("#nav a").first).to_be_visible()
            expect(page.locator("#nav").get_by_role("link", name="Evaluation")).to_have_count(0)


def test_a_judge_evaluator_is_made_from_its_own_fields_and_tried_on_no_record_says_so(
    console: Console, client: httpx.Client
) -> None:
    page = settled(console.sign_in(route="#/evaluators/+new"))
    page.get_by_label("Name", exact=True).fill("helpful")
    page.get_by_label("Type").select_option("llm_judge")
    expect(page.get_by_label("Pattern")).to_be_hidden()
    page.get_by_label("Judge prompt").fill("judge-helpfulness")
    page.get_by_label("Label", exact=True).fill("production")
    page.get_by_label("Categories (JSON)").fill('{"helpful": 1, "unhelpful": 0}')
    page.get_by_role("button", name="Try on records").click()
    # A judge is tried as any evaluator is (tests/console/test_evaluator_judge_trial.py):
    # here on no record, the project having none.
    expect(page.locator(".try-results")).to_contain_text("No records to try it on yet")
    # A categories box that is not JSON is said so before anything is sent.
    page.get_by_label("Categories (JSON)").fill("{helpful")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("Categories")
    page.get_by_label("Categories (JSON)").fill('{"helpful": 1, "unhelpful": 0}')
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("helpful")
    saved = client.get("/v1/evaluators/helpful").json()["data"]
    assert saved["definition"] == {
        "type": "llm_judge",
        "name": "helpful",
        "prompt": "judge-helpfulness",
        "label": "production",
        "categories": {"helpful": 1, "unhelpful": 0},
    }
    # The edit form holds the judge's fields as saved.
    expect(page.get_by_label("Judge prompt")).to_have_value("judge-helpfulness")
    expect(page.get_by_label("Categories (JSON)")).to_have_value('{"helpful":1,"unhelpful":0}')
    assert console.errors == []
