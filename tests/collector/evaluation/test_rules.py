"""Evaluation rules (docs/api-notes.md, "Online evaluation"; issue 50 point 1): every field of
the rule stored and answered, its CRUD, and every bad field a 400 naming it. Real chDB, the
app over ASGI."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.contract import assert_error
from tests.collector.evaluation.steps import create_rule, put_evaluator

ZERO_COUNTS = {
    "scored": 0,
    "not_sampled": 0,
    "waiting": 0,
    "budget_exhausted": 0,
    "rate_limited": 0,
    "connection_blocked": 0,
    "error": 0,
}


@pytest.fixture(autouse=True)
def _exact(api: TestClient) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})


def test_a_rule_takes_every_field_and_defaults_the_rest(api: TestClient) -> None:
    plain = create_rule(api)
    assert plain["id"].startswith("rule_") and len(plain["id"]) == 37
    assert {k: v for k, v in plain.items() if k not in ("id", "created_at", "updated_at")} == {
        "name": "exact on answers",
        "evaluator": "exact",
        "evaluator_version": None,
        "target": "record",
        "filter": {},
        "sampling": 1.0,
        "delay_seconds": 0,
        "idle_seconds": 120,
        "mapping": None,
        "score_name": "exact",  # the evaluator's name
        "daily_budget_usd": None,
        "max_per_minute": None,
        "enabled": True,
        "counts": ZERO_COUNTS,
        "backfill": None,
    }
    full = create_rule(
        api,
        name="judged sessions",
        evaluator_version=1,
        target="session",
        filter={
            "prompt_name": "support",
            "label": "production",
            "model": "gpt-4o-mini",
            "kind": "llm",
            "status": "success",
            "span_name": "answer",
            "metadata": {"tier": "gold", "beta": True},
        },
        sampling=0.25,
        delay_seconds=5,
        idle_seconds=600,
        mapping={"input": "transcript", "output": "output.content", "expected": "metadata.gold"},
        score_name="helpful",
        daily_budget_usd=2.5,
        max_per_minute=30,
        enabled=False,
    )
    got = api.get(f"/v1/evaluation-rules/{full['id']}").json()["data"]
    assert got == full
    assert got["filter"]["metadata"] == {"tier": "gold", "beta": True}
    assert got["mapping"] == {
        "input": "transcript",
        "output": "output.content",
        "expected": "metadata.gold",
    }
    assert (got["sampling"], got["score_name"], got["enabled"]) == (0.25, "helpful", False)
    listed = api.get("/v1/evaluation-rules").json()
    assert [r["id"] for r in listed["data"]] == [full["id"], plain["id"]]  # newest first


def test_rules_list_by_cursor(api: TestClient) -> None:
    made = [create_rule(api, name=f"r{n}")["id"] for n in range(3)]
    first = api.get("/v1/evaluation-rules", params={"limit": 2}).json()
    assert [r["id"] for r in first["data"]] == made[::-1][:2]
    cursor = first["pagination"]["next_cursor"]
    rest = api.get("/v1/evaluation-rules", params={"limit": 2, "cursor": cursor}).json()
    assert [r["id"] for r in rest["data"]] == [made[0]]
    assert rest["pagination"]["has_more"] is False
    bad = api.get("/v1/evaluation-rules", params={"cursor": "abc"})
    assert_error(bad, 400, "VALIDATION_ERROR", "cursor")


def test_patch_replaces_the_fields_given_and_null_resets_an_optional_one(
    api: TestClient,
) -> None:
    put_evaluator(api, "contains", {"type": "contains"})
    rule = create_rule(api, score_name="custom", max_per_minute=10, filter={"model": "m"})
    patched = api.patch(
        f"/v1/evaluation-rules/{rule['id']}",
        json={"sampling": 0.5, "filter": {"status": "error"}, "score_name": None,
              "evaluator": "contains"},
    )  # fmt: skip
    assert patched.status_code == 200, patched.text
    data = patched.json()["data"]
    assert data["sampling"] == 0.5
    assert data["filter"] == {"status": "error"}  # replaced whole
    assert data["score_name"] == "contains"  # reset: the (new) evaluator's name
    assert data["max_per_minute"] == 10  # not given: kept
    assert data["created_at"] == rule["created_at"]
    assert data["updated_at"] > rule["updated_at"]
    assert api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"] == data

    for body, field in (
        ({"sampling": None}, "sampling"),
        (
            {"target": "trace", "mapping": {"input": "transcript", "output": "output"}},
            "mapping.input",
        ),
        ({"sampling": 2}, "sampling"),
        ({"unknown": 1}, "unknown"),
    ):
        response = api.patch(f"/v1/evaluation-rules/{rule['id']}", json=body)
        assert_error(response, 400, "VALIDATION_ERROR", field)
    unknown = api.patch(f"/v1/evaluation-rules/{rule['id']}", json={"evaluator": "gone"})
    assert_error(unknown, 404, "EVALUATOR_NOT_FOUND")
    assert api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"] == data


def test_a_deleted_rule_is_gone_and_unknown_ids_are_404(api: TestClient) -> None:
    rule = create_rule(api)
    deleted = api.delete(f"/v1/evaluation-rules/{rule['id']}")
    assert deleted.status_code == 200 and deleted.json()["data"]["id"] == rule["id"]
    for response in (
        api.get(f"/v1/evaluation-rules/{rule['id']}"),
        api.patch(f"/v1/evaluation-rules/{rule['id']}", json={"enabled": False}),
        api.delete(f"/v1/evaluation-rules/{rule['id']}"),
        api.get(f"/v1/evaluation-rules/{rule['id']}/decisions"),
        api.get("/v1/evaluation-rules/rule_nope"),
    ):
        assert_error(response, 404, "RULE_NOT_FOUND")
    assert api.get("/v1/evaluation-rules").json()["data"] == []


def test_a_rule_naming_an_unknown_evaluator_or_version_is_404(api: TestClient) -> None:
    response = api.post(
        "/v1/evaluation-rules", json={"name": "r", "evaluator": "nope", "target": "record"}
    )
    assert assert_error(response, 404, "EVALUATOR_NOT_FOUND")["evaluator"] == "nope"
    response = api.post(
        "/v1/evaluation-rules",
        json={"name": "r", "evaluator": "exact", "evaluator_version": 2, "target": "record"},
    )
    assert assert_error(response, 404, "EVALUATOR_NOT_FOUND")["version"] == 2


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
        ({"evaluator": "has space"}, "evaluator"),
        ({"evaluator_version": 0}, "evaluator_version"),
        ({"target": "span"}, "target"),
        ({"filter": {"prompt": "x"}}, "filter.prompt"),
        ({"filter": {"kind": "thought"}}, "filter.kind"),
        ({"filter": {"status": "ok"}}, "filter.status"),
        ({"filter": {"version": 0, "prompt_name": "p"}}, "filter.version"),
        ({"filter": {"version": 2}}, "filter.version"),
        ({"filter": {"label": "production"}}, "filter.label"),
        ({"filter": {"prompt_name": "p", "version": 2, "label": "l"}}, "filter.label"),
        ({"filter": {"metadata": {"k": {"nested": 1}}}}, "filter.metadata.k"),
        ({"filter": "prompt_name=x"}, "filter"),
        ({"sampling": 1.5}, "sampling"),
        ({"sampling": -0.1}, "sampling"),
        ({"sampling": "half"}, "sampling"),
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"idle_seconds": 10**9}, "idle_seconds"),
        ({"mapping": {"input": "input"}}, "mapping.output"),
        ({"mapping": {"input": "prompt", "output": "output"}}, "mapping.input"),
        ({"mapping": {"input": "input", "output": "outputs.text"}}, "mapping.output"),
        (
            {"mapping": {"input": "input", "output": "output", "expected": "metadata."}},
            "mapping.expected",
        ),
        ({"mapping": {"input": "transcript", "output": "output"}}, "mapping.input"),
        ({"mapping": {"input": "input", "output": "output", "extra": "x"}}, "mapping.extra"),
        ({"score_name": ""}, "score_name"),
        ({"daily_budget_usd": -1}, "daily_budget_usd"),
        ({"max_per_minute": 0}, "max_per_minute"),
        ({"enabled": "sometimes"}, "enabled"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_every_bad_field_is_a_400_naming_it(
    api: TestClient, fields: dict[str, Any], field: str
) -> None:
    body = {"name": "r", "evaluator": "exact", "target": "record", **fields}
    response = api.post("/v1/evaluation-rules", json=body)
    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert api.get("/v1/evaluation-rules").json()["data"] == []


def test_a_bad_mapping_path_is_named_with_the_paths_there_are(api: TestClient) -> None:
    body = {"name": "r", "evaluator": "exact", "target": "trace",
            "mapping": {"input": "input_variables.question", "output": "outputs.text"}}  # fmt: skip
    response = api.post("/v1/evaluation-rules", json=body)
    assert_error(response, 400, "VALIDATION_ERROR", "mapping.output")
    message = response.json()["error"]["message"]
    assert "'outputs.text'" in message
    for path in ("input_variables.<key>", "output.content", "metadata.<key>", "transcript"):
        assert path in message
    body["mapping"] = {"input": "transcript", "output": "output.content"}
    response = api.post("/v1/evaluation-rules", json=body)
    assert_error(response, 400, "VALIDATION_ERROR", "mapping.input")
    assert "session" in response.json()["error"]["message"]


def test_another_project_sees_and_changes_none_of_a_project_s_rules(
    api: TestClient, other: TestClient
) -> None:
    rule = create_rule(api)
    assert other.get("/v1/evaluation-rules").json()["data"] == []
    for response in (
        other.get(f"/v1/evaluation-rules/{rule['id']}"),
        other.patch(f"/v1/evaluation-rules/{rule['id']}", json={"enabled": False}),
        other.delete(f"/v1/evaluation-rules/{rule['id']}"),
        other.get(f"/v1/evaluation-rules/{rule['id']}/decisions"),
    ):
        assert_error(response, 404, "RULE_NOT_FOUND")
    # The evaluator is the project's own: another project cannot name it.
    response = other.post(
        "/v1/evaluation-rules", json={"name": "r", "evaluator": "exact", "target": "record"}
    )
    assert_error(response, 404, "EVALUATOR_NOT_FOUND")
    assert api.get(f"/v1/evaluation-rules/{rule['id']}").json()["data"] == rule


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ('"mapping": {"input": "metadata.\\ud800", "output": "output"}', "mapping.input"),
        ('"filter": {"metadata": {"k": "\\ud800"}}', "filter.metadata"),
        ('"filter": {"metadata": {"k": NaN}}', "filter.metadata"),
        ('"daily_budget_usd": Infinity', "daily_budget_usd"),
    ],
)
def test_text_that_cannot_be_stored_and_numbers_that_are_none_are_a_400(
    api: TestClient, fields: str, field: str
) -> None:
    text = '{"name": "r", "evaluator": "exact", "target": "record", ' + fields + "}"
    response = api.post(
        "/v1/evaluation-rules", content=text.encode(), headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert api.get("/v1/evaluation-rules").json()["data"] == []
