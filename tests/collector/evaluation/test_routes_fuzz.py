"""Arbitrary JSON on online evaluation's write routes is never a 5xx: each 4xx is the
contract's error body, and a refused write stores nothing (no evaluator version, no rule, no
change to a rule). Bodies are built from valid ones with fields replaced by odd values (NaN
and Infinity literals, lone surrogates, NUL, integers past 64 bits, deep nesting)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given

from tests.collector.evaluation.steps import create_rule, put_evaluator
from tests.fuzz_bodies import FUZZ, body_of, json_values, send, taken

VALUES = json_values("transcript", "output.", "{x}", keys=("\udfff", "\x00", "output"))


EVALUATOR = {"type": "llm_judge", "prompt": "judge", "label": "production", "name": "helpful",
             "categories": {"good": 1, "bad": 0}}  # fmt: skip
RULE = {
    "name": "r",
    "evaluator": "exact",
    "evaluator_version": 1,
    "target": "session",
    "filter": {"prompt_name": "p", "version": 2, "kind": "llm", "metadata": {"k": "v"}},
    "sampling": 0.5,
    "delay_seconds": 3,
    "idle_seconds": 60,
    "mapping": {"input": "transcript", "output": "output.content", "expected": "metadata.x"},
    "score_name": "s",
    "daily_budget_usd": 1.0,
    "max_per_minute": 5,
    "enabled": False,
}


@FUZZ
@given(body=body_of(EVALUATOR, VALUES))
def test_evaluator_put(api: TestClient, body: Any) -> None:
    before = api.get("/v1/evaluators").json()["data"]
    if not taken(send(api, "PUT", "/v1/evaluators/fuzzed", body)):
        assert api.get("/v1/evaluators").json()["data"] == before


@FUZZ
@given(body=body_of(RULE, VALUES))
def test_rule_create(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    before = api.get("/v1/evaluation-rules").json()["data"]
    response = send(api, "POST", "/v1/evaluation-rules", body)
    if taken(response):
        api.delete(f"/v1/evaluation-rules/{response.json()['data']['id']}")
    else:
        assert api.get("/v1/evaluation-rules").json()["data"] == before


@FUZZ
@given(body=body_of(RULE, VALUES))
def test_rule_patch(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    listed = api.get("/v1/evaluation-rules").json()["data"]
    rule = listed[0] if listed else create_rule(api)
    response = send(api, "PATCH", f"/v1/evaluation-rules/{rule['id']}", body)
    if not taken(response):
        assert api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"] == rule


WINDOW = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00+02:00"}


@FUZZ
@given(body=body_of(WINDOW, VALUES))
def test_rule_backfill(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    listed = api.get("/v1/evaluation-rules").json()["data"]
    rule = listed[0] if listed else create_rule(api)
    response = send(api, "POST", f"/v1/evaluation-rules/{rule['id']}/backfill", body)
    if taken(response):
        assert response.status_code == 202
        assert response.json()["data"]["status"] == "running"


TRIAL = {
    "evaluator": {"type": "regex", "pattern": "a"},
    "request_ids": ["req_missing"],
    "mapping": {"input": "input", "output": "output.content"},
}


@FUZZ
@given(body=body_of(TRIAL, VALUES))
def test_evaluator_try(api: TestClient, body: Any) -> None:
    before = api.get("/v1/evaluators").json()["data"]
    response = send(api, "POST", "/v1/evaluators/try", body)
    if taken(response):
        assert response.status_code == 200
    # A try writes nothing, taken or not.
    assert api.get("/v1/evaluators").json()["data"] == before
    assert api.get("/v1/scores").json()["data"] == []
