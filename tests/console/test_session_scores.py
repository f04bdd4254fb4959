"""A session's page lists the scores given to the session itself (docs/api-notes.md, "Scores":
a score may judge a whole conversation, `session_id`), with their comments and corrections,
beside the means over the session, its records and their traces; a reviewer scores the whole
conversation from it. A live collector, Debian's Chromium, laptop and phone width, light and
dark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from .conftest import Console, expect
from .steps import both_looks, card, post, settled

if TYPE_CHECKING:
    pass

SESSION = "chat-console-scores"


def test_a_session_page_lists_the_session_s_scores_and_scores_the_session(
    console: Console, client: httpx.Client, log: Any
) -> None:
    log(
        {"id": "req_sturn1", "model": "gpt-4o-mini", "status": "success", "input": "hello",
         "output": {"content": "hi, how can I help?"}, "metadata": {"session_id": SESSION}},
        {"id": "req_sturn2", "model": "gpt-4o-mini", "status": "success", "input": "my order?",
         "output": {"content": "it ships today"}, "metadata": {"session_id": SESSION}},
    )  # fmt: skip
    post(
        client,
        "/v1/scores",
        {"session_id": SESSION, "name": "resolved", "value": True, "source": "annotation",
         "comment": "user said thanks", "correction": "Add the tracking number."},
    )  # fmt: skip
    # A turn's own score counts in the session's means, not among the session's own scores.
    post(client, "/v1/scores", {"request_id": "req_sturn2", "name": "helpful", "value": 0.5})

    page = settled(console.sign_in(route=f"#/sessions/{SESSION}"))
    scores = card(page, "Scores")
    expect(scores.locator(".score-means .badge")).to_have_text(["helpful 0.5", "resolved true"])
    expect(scores.get_by_role("heading", name="On the session")).to_be_visible()
    item = scores.locator("li.score-item")
    expect(item).to_have_count(1)
    expect(item.locator(".score-head")).to_contain_text("resolved true")
    expect(item.locator(".score-head")).to_contain_text("annotation")
    expect(item.locator("dd")).to_have_text(["user said thanks", "Add the tracking number."])
    # The session's score is no record's: the item links nowhere (no empty record link).
    expect(item.get_by_role("link")).to_have_count(0)
    both_looks(console, page, "session-scores")

    # A reviewer's thumbs-down judges the whole conversation.
    page.get_by_label("Score name").fill("tone")
    page.get_by_label("▼ Bad").check()
    page.get_by_label("Comment").fill("curt")
    page.get_by_role("button", name="Save score").click()
    expect(page.get_by_role("status").filter(has_text="Saved")).to_have_text("Saved tone false.")
    expect(item).to_have_count(2)
    expect(item.first.locator(".score-head")).to_contain_text("tone false")

    stored = client.get("/v1/scores", params={"session_id": SESSION}).json()["data"]
    assert [(s["name"], s["value"], s["source"]) for s in stored] == [
        ("tone", False, "annotation"),
        ("resolved", True, "annotation"),
    ]
    assert (stored[0]["session_id"], stored[0]["request_id"], stored[0]["trace_id"]) == (
        SESSION,
        None,
        None,
    )
    assert stored[0]["comment"] == "curt"
    # Reloaded, the page reads it back from the collector.
    page.reload()
    settled(page)
    expect(card(page, "Scores").locator("li.score-item .score-head")).to_contain_text(
        ["tone false", "resolved true"]
    )
    assert console.errors == []
