"""A session's page shows its evaluations with their reasons (issue 50 point 5), as a trace's
does: a rule judging sessions scored it, another left it out of its sample and says why; the
score shows among the session's. A live collector (its worker deciding), Debian's Chromium,
laptop and phone width, light and dark."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import httpx

from .conftest import Console, expect
from .steps import both_looks, card, post, settled

if TYPE_CHECKING:
    pass

SESSION = "chat-console-7"


def _final(client: httpx.Client, rule_id: str) -> dict[str, Any]:
    """The rule's one decision once final (the worker runs on its own)."""
    for _ in range(240):
        response = client.get(f"/v1/evaluation-rules/{rule_id}/decisions")
        assert response.status_code == 200, response.text
        found = [d for d in response.json()["data"] if d["decision"] != "waiting"]
        if found:
            (decision,) = found
            return dict(decision)
        time.sleep(0.25)
    raise AssertionError("the worker decided nothing")


def test_a_session_page_shows_each_rule_s_decision_with_its_reason(
    console: Console, client: httpx.Client, log: Any
) -> None:
    client.put("/v1/evaluators/is-json", json={"type": "json_valid"}).raise_for_status()
    judged = post(
        client,
        "/v1/evaluation-rules",
        {"name": "conversations end in JSON", "evaluator": "is-json", "target": "session",
         "idle_seconds": 0},
    )  # fmt: skip
    skipped = post(
        client,
        "/v1/evaluation-rules",
        {"name": "a sample of none", "evaluator": "is-json", "target": "session",
         "idle_seconds": 0, "sampling": 0},
    )  # fmt: skip
    log(
        {"id": "req_turn1", "model": "gpt-4o-mini", "status": "success", "input": "hello",
         "output": {"content": "hi, how can I help?"}, "metadata": {"session_id": SESSION}},
        {"id": "req_turn2", "model": "gpt-4o-mini", "status": "success", "input": "as JSON",
         "output": {"content": '{"answer": 42}'}, "metadata": {"session_id": SESSION}},
    )  # fmt: skip
    assert _final(client, judged["id"])["decision"] == "scored"
    assert _final(client, skipped["id"])["decision"] == "not_sampled"

    page = settled(console.sign_in(route=f"#/sessions/{SESSION}"))
    evaluations = card(page, "Evaluations")
    scored = evaluations.locator("li.evaluation", has=page.locator(".badge", has_text="scored"))
    expect(scored).to_contain_text("json_valid: True")
    expect(scored.get_by_role("link", name="conversations end in JSON")).to_be_visible()
    left_out = evaluations.locator(
        "li.evaluation", has=page.locator(".badge", has_text="not_sampled")
    )
    expect(left_out).to_contain_text("outside the rule's sample (sampling 0.0)")
    expect(left_out).to_contain_text("is-json v1")  # the version the rule runs, never v0
    expect(card(page, "Scores")).to_contain_text("is-json")
    both_looks(console, page, "session-evaluations")

    # The rule's link leads to its page, which lists the session among its decisions.
    scored.get_by_role("link", name="conversations end in JSON").click()
    expect(page.locator("table.decisions")).to_contain_text(f"session {SESSION}")
    assert console.errors == []
