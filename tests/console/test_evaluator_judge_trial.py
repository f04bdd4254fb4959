"""Trying an LLM judge in the evaluator editor (issue 50 point 5; docs/api-notes.md, "Online
evaluation"): the "Try on records" of a judge calls its model (the OpenAI stub) on each record
and shows each verdict with the call's cost and a link to the judge's own record, nothing
saved. A live collector, Debian's Chromium, laptop and phone width, light and dark."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import httpx

from promptrail.testing import OpenAIStub

from .conftest import Console, expect
from .steps import both_looks, rows, settled

if TYPE_CHECKING:
    pass


def _record(rid: str) -> dict[str, Any]:
    return {
        "id": rid,
        "prompt_name": "greet",
        "model": "gpt-4o-mini",
        "status": "success",
        "input_variables": {"name": rid},
        "output": {"content": f"Hello {rid}"},
    }


def test_a_judge_is_tried_in_the_editor_with_each_call_s_cost_and_record(
    console: Console, client: httpx.Client, log: Any, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Score: 4"
    made = client.post(
        "/v1/prompts",
        json={"name": "grader", "template": "Grade {output} from 1-5", "model": "gpt-4o-mini"},
    )
    assert made.status_code == 201, made.text
    log(_record("req_tj-1"), _record("req_tj-2"))
    page = settled(console.sign_in(route="#/evaluators/+new"))
    page.get_by_label("Name", exact=True).fill("helpful")
    page.get_by_label("Type").select_option("llm_judge")
    page.get_by_label("Judge prompt").fill("grader")
    page.get_by_label("Records").fill("req_tj-1 req_tj-2 req_tj-missing")
    page.get_by_role("button", name="Try on records").click()
    expect(page.locator("table.trial tbody tr")).to_have_count(3)
    found = rows(page)
    assert [row[0] for row in found] == ["req_tj-1", "req_tj-2", "req_tj-missing"]
    assert [row[2] for row in found[:2]] == ["4", "4"]
    assert all(row[3].startswith("$") and row[3] != "$0" for row in found[:2]), found
    assert found[2][4] == "no call"
    assert len(openai_stub.calls) == 2
    # Nothing saved: no evaluator, no score.
    assert client.get("/v1/evaluators").json()["data"] == []
    assert client.get("/v1/scores").json()["data"] == []
    both_looks(console, page, "evaluator-judge-tried")

    # Each verdict links the judge's own record: the call, judging the record tried.
    link = page.locator("table.trial tbody tr").first.locator("a.judge-record")
    judge_id = link.inner_text()
    judge = client.get(f"/v1/requests/{judge_id}").json()["data"]
    assert judge["metadata"] == {"judge_of": "req_tj-1", "trial": True}
    link.click()
    settled(page)
    expect(page).to_have_url(re.compile(re.escape(judge_id)))
    expect(page.get_by_role("heading", level=1)).to_contain_text("grader")
    expect(page.locator("main")).to_contain_text("judge_ofreq_tj-1")  # its metadata
    assert console.errors == []
