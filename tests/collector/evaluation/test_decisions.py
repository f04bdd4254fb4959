"""A rule's decisions (docs/api-notes.md, "Online evaluation"; issue 50 points 1 and 3): one
per (rule, target), a ``waiting`` replaced by the final one and never the other way round,
listed newest first by cursor and kind, counted by kind on the rule; and the deterministic
sample. Real chDB, the app over ASGI; decisions written through the service the worker calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.services.evaluation import Evaluation, Rule, in_sample
from promptrail.collector.store.evaluation import DecisionRow
from promptrail.collector.store.writes import STORED
from tests.collector.contract import assert_error
from tests.collector.evaluation.steps import create_rule, put_evaluator


def evaluation(api: TestClient) -> Evaluation:
    """The app's online-evaluation services."""
    found: Evaluation = api.app.state.services.evaluation
    return found


@pytest.fixture
def rule(api: TestClient) -> Rule:
    put_evaluator(api, "exact", {"type": "exact_match"})
    made = create_rule(api)
    return evaluation(api).rules.live("default", made["id"])


def decisions(api: TestClient, rule_id: str, **params: Any) -> list[dict[str, Any]]:
    """Every decision of the rule the list gives, following the cursor."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params=query)
        assert response.status_code == 200, response.text
        found += response.json()["data"]
        cursor = response.json()["pagination"].get("next_cursor")
        if not cursor:
            return found


def test_a_waiting_decision_is_replaced_by_the_final_one_and_never_the_reverse(
    api: TestClient, rule: Rule
) -> None:
    decide = evaluation(api).decisions.decide
    decide("default", rule, "trace", "t1", "waiting", "idle for 120 s after the last record")
    decide("default", rule, "trace", "t1", "scored", "", score_id="s1", evaluator_version=1,
           cost_usd=0.002, judge_request_id="req_j")  # fmt: skip
    # A waiting written late (a slow worker) does not bring the target back to waiting.
    decide("default", rule, "trace", "t1", "waiting", "late")
    (only,) = decisions(api, rule.id)
    assert {k: v for k, v in only.items() if k != "decided_at"} == {
        "rule_id": rule.id,
        "target_type": "trace",
        "target_id": "t1",
        "decision": "scored",
        "reason": "",
        "evaluator": "exact",
        "evaluator_version": 1,
        "score_id": "s1",
        "judge_request_id": "req_j",
        "cost_usd": 0.002,
    }
    # Still one after the store merges its parts.
    store = api.app.state.services.store
    store.client.command(f"OPTIMIZE TABLE `{store.database}`.evaluation_decisions FINAL")
    assert [d["decision"] for d in decisions(api, rule.id)] == ["scored"]
    counts = api.get(f"/v1/evaluation-rules/{rule.id}").json()["data"]["counts"]
    assert counts["scored"] == 1 and counts["waiting"] == 0


def test_decisions_list_newest_first_by_cursor_and_kind_and_count_on_the_rule(
    api: TestClient, rule: Rule
) -> None:
    decide = evaluation(api).decisions.decide
    kinds = ["scored", "not_sampled", "error", "scored", "rate_limited", "waiting", "scored"]
    for n, kind in enumerate(kinds):
        decide("default", rule, "record", f"req_{n}", kind, f"reason {n}")
    every = decisions(api, rule.id, limit=2)
    assert [d["target_id"] for d in every] == [f"req_{n}" for n in reversed(range(len(kinds)))]
    assert [d["decided_at"] for d in every] == sorted(
        (d["decided_at"] for d in every), reverse=True
    )
    scored = decisions(api, rule.id, decision="scored", limit=1)
    assert [d["target_id"] for d in scored] == ["req_6", "req_3", "req_0"]
    got = api.get(f"/v1/evaluation-rules/{rule.id}").json()["data"]
    assert got["counts"] == {
        "scored": 3,
        "not_sampled": 1,
        "waiting": 1,
        "budget_exhausted": 0,
        "rate_limited": 1,
        "connection_blocked": 0,
        "error": 1,
    }
    listed = api.get("/v1/evaluation-rules").json()["data"]
    assert listed[0]["counts"] == got["counts"]

    path = f"/v1/evaluation-rules/{rule.id}/decisions"
    assert_error(api.get(path, params={"decision": "maybe"}), 400, "VALIDATION_ERROR", "decision")
    assert_error(api.get(path, params={"limit": 0}), 400, "VALIDATION_ERROR", "limit")
    other_list = api.get("/v1/evaluation-rules", params={"limit": 1})
    assert other_list.status_code == 200
    foreign = api.get(path, params={"cursor": "bm90IG91cnM"})
    assert_error(foreign, 400, "VALIDATION_ERROR", "cursor")


def test_another_project_sees_none_of_a_project_s_decisions(
    api: TestClient, other: TestClient, rule: Rule
) -> None:
    evaluation(api).decisions.decide("default", rule, "record", "req_1", "scored", "")
    assert_error(other.get(f"/v1/evaluation-rules/{rule.id}/decisions"), 404, "RULE_NOT_FOUND")
    # Even a decision written under another project's name for the same rule id stays there.
    evaluation(api).decisions.decide("other", rule, "record", "req_2", "error", "boom")
    assert [d["target_id"] for d in decisions(api, rule.id)] == ["req_1"]
    counts = api.get(f"/v1/evaluation-rules/{rule.id}").json()["data"]["counts"]
    assert (counts["scored"], counts["error"]) == (1, 0)


def test_sampling_is_deterministic_and_takes_about_its_fraction() -> None:
    ids = [f"req_{n:05d}" for n in range(10_000)]
    for sampling in (0.1, 0.5, 0.9):
        taken = [i for i in ids if in_sample("rule_a", i, sampling)]
        assert abs(len(taken) / len(ids) - sampling) < 0.02, (sampling, len(taken))
        # The same answer every time, and a larger sample holds the smaller one.
        assert taken == [i for i in ids if in_sample("rule_a", i, sampling)]
        assert set(taken) <= {i for i in ids if in_sample("rule_a", i, min(1.0, sampling + 0.1))}
    assert all(in_sample("rule_a", i, 1.0) for i in ids)
    assert not any(in_sample("rule_a", i, 0.0) for i in ids)
    # Another rule samples other targets.
    mine = {i for i in ids if in_sample("rule_a", i, 0.5)}
    theirs = {i for i in ids if in_sample("rule_b", i, 0.5)}
    assert 0.4 < len(mine & theirs) / len(mine) < 0.6


def test_a_target_decided_again_is_listed_once_where_its_surviving_decision_was_made(
    api: TestClient, rule: Rule
) -> None:
    decide = evaluation(api).decisions.decide
    for n in range(3):
        decide("default", rule, "session", f"s{n}", "scored", "")
    # Many late waiting rows (a slow worker) after the final ones: newer, and never shown.
    for _ in range(40):
        for n in range(3):
            decide("default", rule, "session", f"s{n}", "waiting", "late")
    assert [d["target_id"] for d in decisions(api, rule.id, limit=1)] == ["s2", "s1", "s0"]
    assert decisions(api, rule.id, decision="waiting") == []
    # A final decision made again (a backfill) moves its target to the top, still once.
    decide("default", rule, "session", "s0", "error", "judge failed")
    listed = decisions(api, rule.id, limit=2)
    assert [(d["target_id"], d["decision"]) for d in listed] == [
        ("s0", "error"),
        ("s2", "scored"),
        ("s1", "scored"),
    ]
    assert [d["target_id"] for d in decisions(api, rule.id, decision="scored")] == ["s2", "s1"]


def test_targets_still_waiting_behind_thousands_of_replaced_waiting_rows_are_all_listed(
    api: TestClient, rule: Rule
) -> None:
    # Three targets waiting since before 4,500 others arrived, waited and were decided: a
    # page of `decision=waiting` reads replaced rows first, in growing batches and then from
    # the decisions' own table, and lists exactly the three, newest first, each once.
    start = datetime(2026, 11, 1, tzinfo=UTC)

    def row(target: str, decision: str, seconds: float) -> DecisionRow:
        at = start + timedelta(seconds=seconds)
        return DecisionRow(rule.id, "record", target, decision, "", "exact", 1, at)

    still = [row(f"req_still-{n}", "waiting", n) for n in range(3)]
    replaced = [row(f"req_done-{n:04d}", "waiting", 10 + n) for n in range(4500)]
    final = [row(f"req_done-{n:04d}", "scored", 10_000 + n) for n in range(4500)]
    store = evaluation(api).decision_store
    for rows in (still, replaced, final):
        assert store.append("default", rows) is STORED
    waiting = decisions(api, rule.id, decision="waiting", limit=2)
    assert [d["target_id"] for d in waiting] == ["req_still-2", "req_still-1", "req_still-0"]
    every = decisions(api, rule.id, limit=100)
    assert len(every) == 4503
    assert [d["target_id"] for d in every[:2]] == ["req_done-4499", "req_done-4498"]
    assert {d["decision"] for d in every[:4500]} == {"scored"}
    assert decisions(api, rule.id, decision="scored", limit=100) == every[:4500]
