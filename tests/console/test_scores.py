"""Scores in the console (issue 31, point 5): badges in the log and the detail, a reviewer's
score from the keyboard, filters by score, the review queue. Scores are posted through the
public API of a live collector, as an evaluator or the SDK posts them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from .conftest import LAPTOP, PHONE, Console, expect
from .records import record
from .steps import card, rows

if TYPE_CHECKING:
    from playwright.sync_api import Page

Log = Callable[..., None]
ANY_HINT = "What the output should have been (Ctrl+Enter saves)"


def post_score(client: httpx.Client, **score: Any) -> dict[str, Any]:
    """Post one score through POST /v1/scores; return it as stored."""
    response = client.post("/v1/scores", json=score)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def four_records(log: Log) -> None:
    """Three records of support-reply, a day apart (newest first), then one of another prompt."""
    log(
        record(1, created_at="2026-11-24T09:15:00Z"),
        record(2, created_at="2026-11-23T09:15:00Z"),
        record(3, created_at="2026-11-22T09:15:00Z"),
        record(4, created_at="2026-11-21T09:15:00Z", prompt_name="classify-intent"),
    )


def scored_records(log: Log, client: httpx.Client) -> None:
    """The four records, the first two scored."""
    four_records(log)
    post_score(client, request_id="req_console_0001", name="helpfulness", value=0.9)
    post_score(client, request_id="req_console_0001", name="helpfulness", value=0.6)
    post_score(
        client,
        request_id="req_console_0001",
        name="tone",
        value="friendly",
        source="eval",
        comment="<b>warm</b> and clear",
        correction="Hello Ada, your order ships today (tracking: ZX-1).",
    )
    post_score(client, request_id="req_console_0002", name="helpfulness", value=0.2)


def settled(page: Page) -> Page:
    expect(page.locator("main")).not_to_have_attribute("aria-busy", "true")
    return page


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_badges_show_the_means_in_the_log_and_every_score_in_the_detail(
    console: Console, log: Log, client: httpx.Client, viewport: dict[str, int]
) -> None:
    scored_records(log, client)
    page = console.sign_in()
    page.set_viewport_size(viewport)
    rows(page)

    badges = page.locator("table.records tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('.badge.score')].map(b => b.innerText))"
    )
    assert badges == [["helpfulness 0.75", "tone friendly"], ["helpfulness 0.2"], [], []]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    suffix = "" if viewport is LAPTOP else "-phone"
    console.screenshot(f"scores-requests{suffix}")

    page.get_by_role("link", name="2026-11-24 09:15:00").click()
    scores = card(page, "Scores")
    expect(scores.locator("li.score-item")).to_have_count(3)
    newest = scores.locator("li.score-item").first
    expect(newest.locator(".badge")).to_have_text("tone friendly")
    expect(newest.locator(".score-head .muted").first).to_contain_text("eval · 2026-")
    # Untrusted text stays text: the comment's markup is shown, not parsed.
    expect(newest.locator("dd").first).to_have_text("<b>warm</b> and clear")
    assert newest.locator("dd b").count() == 0
    expect(newest.locator("pre.correction")).to_have_text(
        "Hello Ada, your order ships today (tracking: ZX-1)."
    )
    assert scores.locator(".badge").all_inner_texts() == [
        "tone friendly",
        "helpfulness 0.6",
        "helpfulness 0.9",
    ]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    if viewport is LAPTOP:
        console.screenshot("scores-detail")
    assert console.errors == []


def focus_outline(page: Page) -> str:
    """The outline of the focused element (or of the label holding a focused radio)."""
    return str(
        page.evaluate(
            """() => {
                const el = document.activeElement;
                const shown = el.type === 'radio' ? el.closest('label') : el;
                return getComputedStyle(shown).outlineStyle;
            }"""
        )
    )


def test_a_reviewer_scores_a_record_with_the_keyboard_alone(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(record(1))
    response = client.put(
        "/v1/score-configs/quality",
        json={"data_type": "categorical", "categories": ["good", "off-topic", "wrong"]},
    )
    assert response.status_code == 200, response.text
    page = settled(console.sign_in(route="#/requests/req_console_0001"))
    expect(card(page, "Scores").get_by_text("No scores yet.")).to_be_visible()

    # A thumbs-down: name typed, Tab to the type (Thumbs by default), Tab to the thumbs, an
    # arrow picks "Bad", Enter saves.
    page.get_by_label("Score name").focus()
    page.keyboard.type("thumbs")
    page.keyboard.press("Tab")
    expect(page.get_by_label("Type")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_label("▲ Good")).to_be_focused()
    assert focus_outline(page) == "solid"
    page.keyboard.press("ArrowRight")
    expect(page.get_by_label("▼ Bad")).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Comment")).to_be_focused()
    assert focus_outline(page) == "solid"
    page.keyboard.type("missed the tracking number")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text("Saved thumbs false.")
    scores = card(page, "Scores")
    expect(scores.locator(".badge")).to_have_text(["thumbs false"])

    # A category from the config: the type follows the config, the value is a choice of its
    # categories; the correction is a text box (Ctrl+Enter saves from it).
    page.get_by_label("Score name").fill("")
    page.get_by_label("Score name").focus()
    page.keyboard.type("quality")
    expect(page.get_by_label("Type")).to_be_disabled()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Value", exact=True)).to_be_focused()
    page.get_by_label("Value", exact=True).select_option("off-topic")
    page.get_by_label("Correction").focus()
    page.keyboard.type("Your order ships today.")
    page.keyboard.press("Control+Enter")
    expect(scores.locator(".badge")).to_have_text(["quality off-topic", "thumbs false"])

    # A number of a config with a range: a value outside it is not sent.
    client.put("/v1/score-configs/accuracy", json={"data_type": "numeric", "min": 0, "max": 1})
    page.reload()
    settled(page)
    page.get_by_label("Score name").fill("accuracy")
    page.get_by_label("Value", exact=True).fill("4")
    page.get_by_label("Value", exact=True).press("Enter")
    # The config's range is the control's: the browser holds the value back and says why.
    assert page.get_by_label("Value", exact=True).evaluate("el => el.validity.rangeOverflow")
    expect(page.locator(".score-form .hint")).to_have_text(["from 0 to 1", ANY_HINT])
    page.get_by_label("Value", exact=True).fill("0.5")
    page.get_by_label("Value", exact=True).press("Enter")
    expect(card(page, "Scores").locator(".badge").first).to_have_text("accuracy 0.5")

    stored = client.get("/v1/scores", params={"request_id": "req_console_0001"}).json()["data"]
    assert [(s["name"], s["value"], s["source"]) for s in stored] == [
        ("accuracy", 0.5, "annotation"),
        ("quality", "off-topic", "annotation"),
        ("thumbs", False, "annotation"),
    ]
    assert stored[1]["correction"] == "Your order ships today."
    assert stored[2]["comment"] == "missed the tracking number"
    console.screenshot("scores-reviewer")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.emulate_media(color_scheme="dark")
    console.screenshot("scores-reviewer-phone-dark")
    assert console.errors == []


def test_the_log_filters_by_a_score_through_the_address(
    console: Console, log: Log, client: httpx.Client
) -> None:
    scored_records(log, client)
    page = console.sign_in()
    rows(page)

    def times_after(**values: str) -> list[str]:
        for label, value in values.items():
            page.get_by_label(label.replace("_", " "), exact=True).fill(value)
        page.get_by_role("button", name="Apply").click()
        return [row[0][:10] for row in rows(page)]

    assert times_after(Score_name="helpfulness", Score_min="0.5") == ["2026-11-24"]
    assert page.url.endswith("#/requests?score_name=helpfulness&score_min=0.5")
    assert times_after(Score_min="", Score_max="0.5") == ["2026-11-23"]
    assert times_after(Score_name="tone", Score_max="", Score_value="friendly") == ["2026-11-24"]
    # The address alone shows the same list (a reload, a shared link), and exports it.
    page.goto(f"{console.url}/#/requests?score_name=helpfulness&score_min=0&score_max=1")
    assert [row[0][:10] for row in rows(page)] == ["2026-11-24", "2026-11-23"]
    with page.expect_download() as download:
        page.get_by_role("button", name="Export JSON").click()
    expect(page.locator(".export-status")).to_have_text("Exported 2 records as JSON.")
    exported = [json.loads(line) for line in download.value.path().read_text().splitlines()]
    assert [item["id"] for item in exported] == ["req_console_0001", "req_console_0002"]


def test_the_review_queue_goes_oldest_first_without_leaving_the_page(
    console: Console, log: Log, client: httpx.Client
) -> None:
    four_records(log)
    post_score(client, request_id="req_console_0002", name="helpfulness", value=0.7)
    config = {"data_type": "numeric", "min": 0, "max": 1}
    assert client.put("/v1/score-configs/helpfulness", json=config).status_code == 200
    page = settled(console.sign_in())
    page.get_by_role("link", name="Review").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.get_by_text("j or n next, k or p previous", exact=False)).to_be_visible()
    page.get_by_label("Prompt").fill("support-reply")
    page.get_by_label("Score name").fill("helpfulness")
    page.get_by_role("button", name="Apply").click()
    status = page.locator("p.summary")

    # Record 3 (oldest), then record 1: record 2 has the score and record 4 is another prompt.
    expect(status).to_have_text("Record 1 of 2 (2 to score).")
    expect(page.locator(".review-title")).to_contain_text("2026-11-22 09:15:00")
    url = page.url
    # The value's control has the focus, and the keys work from it (no number takes a letter).
    expect(page.get_by_label("Value", exact=True)).to_be_focused()
    page.keyboard.press("j")
    expect(status).to_have_text("Record 2 of 2 (2 to score).")
    expect(page.locator(".review-title")).to_contain_text("2026-11-24 09:15:00")
    page.keyboard.press("p")
    expect(status).to_have_text("Record 1 of 2 (2 to score).")
    page.keyboard.press("n")
    expect(status).to_have_text("Record 2 of 2 (2 to score).")
    page.get_by_role("button", name="← Previous").click()
    expect(status).to_have_text("Record 1 of 2 (2 to score).")
    assert page.url == url

    # Saving moves on to the next record.
    expect(page.get_by_label("Value", exact=True)).to_be_focused()
    page.keyboard.type("0.4")
    page.keyboard.press("Enter")
    expect(status).to_have_text("Record 2 of 2 (1 to score).")
    console.screenshot("scores-review-queue")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    console.screenshot("scores-review-queue-phone")

    stored = client.get("/v1/scores", params={"request_id": "req_console_0003"}).json()["data"]
    assert [(s["name"], s["value"], s["source"]) for s in stored] == [
        ("helpfulness", 0.4, "annotation")
    ]
    page.reload()
    expect(status).to_have_text("Record 1 of 1 (1 to score).")
    assert console.errors == []


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_analytics_charts_a_scores_mean_by_day_and_by_version(
    console: Console, log: Log, client: httpx.Client, viewport: dict[str, int]
) -> None:
    log(
        record(1, created_at="2026-11-24T09:15:00Z"),
        record(2, created_at="2026-11-23T09:15:00Z"),
        record(3, created_at="2026-11-22T09:15:00Z", version=2),
    )
    for number, value in ((1, 1.0), (1, 0.5), (2, 0.6), (3, 0.2)):
        post_score(client, request_id=f"req_console_{number:04d}", name="helpfulness", value=value)
    page = console.sign_in(route="#/analytics?start_date=2026-11-20&end_date=2026-11-24")
    page.set_viewport_size(viewport)
    settled(page)
    expect(page.locator("section.metric")).to_have_count(4)  # no score chart till one is named

    page.get_by_label("Score name").fill("helpfulness")
    page.get_by_role("button", name="Apply").click()
    chart = page.locator("section.metric-score")
    expect(chart.locator("h2")).to_have_text("Score “helpfulness” (mean)")
    expect(chart.locator(".total")).to_contain_text("mean 0.575")
    expect(chart.locator(".total .score-count")).to_have_text("4 scores")
    assert chart.locator("g.column title").all_text_contents() == [
        "2026-11-20: no scores (0 scores)",
        "2026-11-21: no scores (0 scores)",
        "2026-11-22: 0.2 (1 scores)",
        "2026-11-23: 0.6 (1 scores)",
        "2026-11-24: 0.75 (2 scores)",
    ]
    assert page.url.endswith("score_name=helpfulness")
    suffix = "" if viewport is LAPTOP else "-phone"
    if viewport is LAPTOP:
        console.screenshot("scores-analytics-by-day")

    page.get_by_label("Group by").select_option("version")
    page.get_by_role("button", name="Apply").click()
    settled(page)
    bars = chart.locator(".bar-row").evaluate_all(
        "rows => rows.map(r => r.innerText.replace(/\\s+/g, ' ').trim())"
    )
    assert sorted(bars) == ["2 0.2", "3 0.7"]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    console.screenshot(f"scores-analytics-by-version{suffix}")
    assert console.errors == []


def test_a_score_on_the_trace_shows_on_its_records(
    console: Console, log: Log, client: httpx.Client
) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    log(record(1, trace_id=trace, span_id="00f067aa0ba902b7"))
    post_score(client, trace_id=trace, name="resolved", value=True, comment="user said thanks")
    page = console.sign_in()

    badge = page.locator("table.records tbody tr .badge.score")
    # A list item carries means (true = 1); a boolean's badge says true, false or the share.
    expect(badge).to_have_text(["resolved true"])
    page.get_by_role("link", name="2026-11-24 09:15:00").click()
    item = card(page, "Scores").locator("li.score-item")
    expect(item.locator(".score-head")).to_contain_text("resolved true")
    expect(item.locator(".score-head")).to_contain_text("on the trace")
    expect(item.locator("dd")).to_have_text("user said thanks")


def test_a_prompt_page_leads_to_its_review_queue(
    console: Console, log: Log, client: httpx.Client
) -> None:
    body = {"name": "support-reply", "template": "Answer {customer}.", "model": "gpt-4o-mini"}
    assert client.post("/v1/prompts", json=body).status_code == 201
    log(record(1))
    page = settled(console.sign_in(route="#/prompts/support-reply"))

    page.get_by_role("link", name="Review records").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.get_by_label("Prompt")).to_have_value("support-reply")
    expect(page.locator("p.summary")).to_have_text("Choose a score name (and a prompt) to review.")
    page.get_by_label("Score name").fill("helpfulness")
    page.get_by_label("Score name").press("Enter")
    expect(page.locator("p.summary")).to_have_text("Record 1 of 1 (1 to score).")
    # Thumbs by default for a name with no config: a click on a thumb, then Enter saves.
    page.get_by_label("▲ Good").check()
    page.get_by_label("▲ Good").press("Enter")
    expect(page.locator("p.summary")).to_have_text("Record 1 of 1: queue done.")
    page.reload()
    expect(page.locator("p.summary")).to_have_text(
        "Nothing to review: every record has this score."
    )


def test_a_score_the_api_refuses_is_explained_and_the_form_kept(
    console: Console, log: Log, client: httpx.Client
) -> None:
    log(record(1))
    page = settled(console.sign_in(route="#/requests/req_console_0001"))
    # The config arrives after the page loaded: only the API can refuse the value now.
    config = {"data_type": "numeric", "min": 0, "max": 1}
    assert client.put("/v1/score-configs/accuracy", json=config).status_code == 200
    page.get_by_label("Score name").fill("accuracy")
    page.get_by_label("Type").select_option("numeric")
    page.get_by_label("Value", exact=True).fill("4")
    page.get_by_label("Comment").fill("way off")
    page.get_by_label("Comment").press("Enter")

    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("VALIDATION_ERROR")
    expect(page.get_by_label("Comment")).to_have_value("way off")
    expect(card(page, "Scores").get_by_text("No scores yet.")).to_be_visible()
    assert client.get("/v1/scores", params={"request_id": "req_console_0001"}).json()["data"] == []
