"""Arbitrary JSON on online evaluation's write routes is never a 5xx: each 4xx is the
contract's error body, and a refused write stores nothing (no evaluator version, no rule, no
change to a rule). Bodies are built from valid ones with fields replaced by odd values (NaN
and Infinity literals, lone surrogates, NUL, integers past 64 bits, deep nesting)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from tests.collector.evaluation.steps import create_rule, put_evaluator

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "promptrail-hypothesis")
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_DEEP = "\x00deep"
SCALAR = st.one_of(
    st.sampled_from(["\ud800", "\x00", "x" * 70_000, "", "transcript", "output.", "{x}"]),
    st.sampled_from([2**64, -(2**63) - 1, float("nan"), float("inf"), -1, 0, 1.5, True]),
    st.just(_DEEP),
    st.none(),
    st.text(max_size=8),
)
JSON_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.sampled_from(["\udfff", "\x00", "output"])),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=6,
)


def body_of(fields: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Bodies from valid ``fields``, each kept, replaced by anything or left out; now and
    then a body that is no object at all."""
    missing = object()
    drawn = st.fixed_dictionaries(
        {
            key: st.one_of(st.just(value), JSON_VALUE, st.just(missing))
            for key, value in fields.items()
        },
        optional={"unexpected": JSON_VALUE},
    ).map(lambda body: {k: v for k, v in body.items() if v is not missing})
    return st.one_of(drawn, drawn, drawn, JSON_VALUE)


def send(api: TestClient, method: str, path: str, body: Any) -> Any:
    """Send ``body`` as JSON text written by hand: NaN stays a literal, a surrogate an escape,
    the deep placeholder 3,000 nested arrays."""
    text = json.dumps(body, allow_nan=True).replace(json.dumps(_DEEP), "[" * 3000 + "]" * 3000)
    return api.request(
        method, path, content=text.encode(), headers={"content-type": "application/json"}
    )


def assert_contract_4xx_or_ok(response: Any) -> bool:
    """Whether the write was taken (2xx); else check it is a 4xx with the error body."""
    if response.status_code < 300:
        return True
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "code", "details"}, error
    return False


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
@given(body=body_of(EVALUATOR))
def test_evaluator_put(api: TestClient, body: Any) -> None:
    before = api.get("/v1/evaluators").json()["data"]
    taken = assert_contract_4xx_or_ok(send(api, "PUT", "/v1/evaluators/fuzzed", body))
    if not taken:
        assert api.get("/v1/evaluators").json()["data"] == before


@FUZZ
@given(body=body_of(RULE))
def test_rule_create(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    before = api.get("/v1/evaluation-rules").json()["data"]
    response = send(api, "POST", "/v1/evaluation-rules", body)
    if assert_contract_4xx_or_ok(response):
        api.delete(f"/v1/evaluation-rules/{response.json()['data']['id']}")
    else:
        assert api.get("/v1/evaluation-rules").json()["data"] == before


@FUZZ
@given(body=body_of(RULE))
def test_rule_patch(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    listed = api.get("/v1/evaluation-rules").json()["data"]
    rule = listed[0] if listed else create_rule(api)
    response = send(api, "PATCH", f"/v1/evaluation-rules/{rule['id']}", body)
    if not assert_contract_4xx_or_ok(response):
        assert api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"] == rule


WINDOW = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00+02:00"}


@FUZZ
@given(body=body_of(WINDOW))
def test_rule_backfill(api: TestClient, body: Any) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    listed = api.get("/v1/evaluation-rules").json()["data"]
    rule = listed[0] if listed else create_rule(api)
    response = send(api, "POST", f"/v1/evaluation-rules/{rule['id']}/backfill", body)
    if assert_contract_4xx_or_ok(response):
        assert response.status_code == 202
        assert response.json()["data"]["status"] == "running"
