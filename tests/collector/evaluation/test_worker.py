"""The evaluation worker on records (issue 50 points 2-4): a collector (ASGI, in process, its
lifespan running the worker) on a real chDB store, judges against the OpenAI wire stub.

Every record that matches an enabled rule gets exactly one decision saying why it was scored
or why not, shown on the rule's decisions and on the record's detail; scores are written with
source ``eval`` under an id derived from the rule and the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.services.evaluation import in_sample
from promptrail.testing import OpenAIStub
from tests.collector.evaluation.steps import create_rule, put_evaluator


def log_records(api: TestClient, ids: list[str], **fields: Any) -> None:
    """Log one model-call record per id (JSON answers, prompt ``greet``)."""
    records = [
        {
            "id": rid,
            "prompt_name": "greet",
            "model": "gpt-4o-mini",
            "status": "success",
            "input_variables": {"name": rid},
            "output": {"content": '{"ok": true}'},
            **fields,
        }
        for rid in ids
    ]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["rejected"] == [], response.text


def decisions(api: TestClient, rule_id: str) -> dict[str, dict[str, Any]]:
    """The rule's decisions by record id."""
    response = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params={"limit": 100})
    assert response.status_code == 200, response.text
    return {d["target_id"]: d for d in response.json()["data"]}


def until(check: Callable[[], Any], seconds: float = 60) -> Any:
    """Poll ``check`` until it returns something truthy; return that."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, "the worker did not decide in time"
        time.sleep(0.1)


def all_decided(api: TestClient, rule_id: str, ids: list[str], final: bool = True) -> Any:
    """Wait until every id has a decision (a final one with ``final``); return them."""

    def check() -> dict[str, dict[str, Any]] | None:
        found = decisions(api, rule_id)
        done = all(i in found and (not final or found[i]["decision"] != "waiting") for i in ids)
        return found if done else None

    return until(check)


def test_each_record_gets_one_decision_sampled_deterministically_and_scored(
    api: TestClient,
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    rule = create_rule(api, evaluator="valid", sampling=0.5, filter={"prompt_name": "greet"})
    ids = [f"req_rec-{n:02d}" for n in range(30)]
    log_records(api, ids)
    log_records(api, ["req_other-1"], prompt_name="another")  # outside the filter
    found = all_decided(api, rule["id"], ids)
    assert set(found) == set(ids)  # the other prompt's record is not a target
    sampled = {i for i in ids if in_sample(rule["id"], i, 0.5)}
    assert 0 < len(sampled) < len(ids)
    for rid, decision in found.items():
        if rid in sampled:
            assert decision["decision"] == "scored", decision
            assert decision["score_id"].startswith("eval_")
            assert decision["evaluator"] == "valid" and decision["evaluator_version"] == 1
        else:
            assert decision["decision"] == "not_sampled", decision
            assert "sampling 0.5" in decision["reason"]
            assert decision["score_id"] is None
    # The score: source eval, the rule and evaluator in its metadata, under the decision's id.
    one = next(iter(sorted(sampled)))
    scores = api.get("/v1/scores", params={"request_id": one}).json()["data"]
    assert len(scores) == 1
    assert scores[0]["id"] == found[one]["score_id"]
    assert (scores[0]["name"], scores[0]["value"], scores[0]["source"]) == ("valid", True, "eval")
    assert scores[0]["metadata"] == {
        "rule_id": rule["id"],
        "evaluator": "valid",
        "evaluator_version": 1,
    }
    # The record's detail says what each rule decided, and why.
    for rid in (one, next(i for i in ids if i not in sampled)):
        detail = api.get(f"/v1/requests/{rid}").json()["data"]
        (evaluation,) = detail["evaluations"]
        assert evaluation["rule_id"] == rule["id"]
        assert evaluation["decision"] == found[rid]["decision"]
        assert evaluation["reason"] == found[rid]["reason"]
    # Counts on the rule's GET.
    counts = api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"]["counts"]
    assert counts["scored"] == len(sampled) and counts["not_sampled"] == 30 - len(sampled)


def test_a_delayed_rule_shows_waiting_then_its_final_decision(api: TestClient) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    rule = create_rule(api, evaluator="valid", delay_seconds=3)
    log_records(api, ["req_late-1"])
    waiting = all_decided(api, rule["id"], ["req_late-1"], final=False)["req_late-1"]
    assert waiting["decision"] == "waiting" and "delay of 3 s" in waiting["reason"]
    detail = api.get("/v1/requests/req_late-1").json()["data"]
    assert [e["decision"] for e in detail["evaluations"]] == ["waiting"]
    final = all_decided(api, rule["id"], ["req_late-1"])["req_late-1"]
    assert final["decision"] == "scored"
    detail = api.get("/v1/requests/req_late-1").json()["data"]
    assert [e["decision"] for e in detail["evaluations"]] == ["scored"]


def test_rate_limits_and_budgets_are_final_decisions_with_their_reason(api: TestClient) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    limited = create_rule(api, name="limited", evaluator="valid", max_per_minute=3)
    broke = create_rule(api, name="broke", evaluator="valid", daily_budget_usd=0)
    ids = [f"req_r-{n}" for n in range(6)]
    log_records(api, ids)
    found = all_decided(api, limited["id"], ids)
    kinds = sorted(d["decision"] for d in found.values())
    assert kinds == ["rate_limited"] * 3 + ["scored"] * 3
    assert all(
        "3 evaluations a minute" in d["reason"]
        for d in found.values()
        if d["decision"] == "rate_limited"
    )
    spent = all_decided(api, broke["id"], ids)
    assert {d["decision"] for d in spent.values()} == {"budget_exhausted"}
    assert "daily budget of 0.0 USD" in spent["req_r-0"]["reason"]
    detail = api.get("/v1/requests/req_r-0").json()["data"]
    assert {e["rule_id"] for e in detail["evaluations"]} == {limited["id"], broke["id"]}


def _judge(api: TestClient, model: str = "gpt-4o-mini") -> None:
    response = api.post(
        "/v1/prompts",
        json={"name": "grader", "template": "Grade {output} from 1-5", "model": model},
    )
    assert response.status_code == 201, response.text
    put_evaluator(api, "grade", {"type": "llm_judge", "prompt": "grader"})


def test_a_judge_s_call_is_a_priced_record_of_the_evaluation_environment(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Score: 4"
    _judge(runs_api)
    rule = create_rule(runs_api, evaluator="grade", filter={"prompt_name": "greet"})
    log_records(runs_api, ["req_j-1", "req_j-2"])
    found = all_decided(runs_api, rule["id"], ["req_j-1", "req_j-2"])
    for rid in ("req_j-1", "req_j-2"):
        decision = found[rid]
        assert decision["decision"] == "scored", decision
        assert decision["cost_usd"] > 0
        judge = runs_api.get(f"/v1/requests/{decision['judge_request_id']}").json()["data"]
        assert judge["environment"] == "promptrail-evaluation"
        assert judge["kind"] == "llm"
        assert judge["metadata"] == {"judge_of": rid, "rule_id": rule["id"]}
        assert judge["usage"]["estimated_cost_usd"] == decision["cost_usd"]
        assert '{\\"ok\\": true}' in str(judge["input"]) or '"ok"' in str(judge["input"])
        (score,) = runs_api.get("/v1/scores", params={"request_id": rid}).json()["data"]
        assert score["value"] == 4 and score["id"] == decision["score_id"]
    # The judges' own records are never judged, and stay out of the default list.
    listed = runs_api.get("/v1/requests").json()["data"]
    assert {r["id"] for r in listed} == {"req_j-1", "req_j-2"}


def test_a_failing_connection_blocks_its_judges_with_the_check_s_status(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    made = runs_api.post(
        "/v1/connections",
        json={"name": "judges", "provider": "openai", "base_url": f"{openai_stub.url}/v1",
              "api_key": "sk-bad-key-000"},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    openai_stub.script.failures = [401] * 20
    _judge(runs_api, model="judges/gpt-4o-mini")
    rule = create_rule(runs_api, evaluator="grade")
    ids = [f"req_b-{n}" for n in range(4)]
    log_records(runs_api, ids)
    found = all_decided(runs_api, rule["id"], ids)
    assert {d["decision"] for d in found.values()} == {"connection_blocked"}
    assert {d["reason"] for d in found.values()} == {"auth_invalid"}
    # Checked again on a back-off, not once per target: one call for the four.
    assert len(openai_stub.calls) == 1


def test_a_judge_prompt_that_does_not_render_is_an_error_decision_with_the_message(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    made = runs_api.post(
        "/v1/prompts",
        json={"name": "grader", "template": "Grade {answer} from 1-5", "model": "gpt-4o-mini"},
    )
    assert made.status_code == 201, made.text
    put_evaluator(runs_api, "grade", {"type": "llm_judge", "prompt": "grader"})
    rule = create_rule(runs_api, evaluator="grade")
    log_records(runs_api, ["req_e-1"])
    found = all_decided(runs_api, rule["id"], ["req_e-1"])["req_e-1"]
    assert found["decision"] == "error"
    assert "answer" in found["reason"] and "input, output and expected_output" in found["reason"]
    assert openai_stub.calls == []
    # The worker goes on: a record logged after it is decided too.
    log_records(runs_api, ["req_e-2"])
    assert all_decided(runs_api, rule["id"], ["req_e-2"])["req_e-2"]["decision"] == "error"


def test_a_disabled_rule_decides_nothing_and_another_project_s_records_are_not_its(
    api: TestClient, other: TestClient
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    off = create_rule(api, name="off", evaluator="valid", enabled=False)
    on = create_rule(api, name="on", evaluator="valid")
    log_records(other, ["req_x-1"])  # another project's record
    log_records(api, ["req_o-1"])
    all_decided(api, on["id"], ["req_o-1"])
    time.sleep(1.0)
    assert set(decisions(api, on["id"])) == {"req_o-1"}
    assert decisions(api, off["id"]) == {}
