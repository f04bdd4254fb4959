"""Named, versioned evaluators (docs/api-notes.md, "Online evaluation"; issue 50 point 1):
every change a new version, the same definition again none; experiments take them by name
and their scores say which version gave them. Real chDB, the app over ASGI."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.testing import OpenAIStub
from tests.collector.contract import assert_error
from tests.collector.evaluation.steps import put_evaluator
from tests.collector.experiments.steps import finished, post, results


def test_every_change_is_a_new_version_and_the_same_definition_again_is_none(
    api: TestClient,
) -> None:
    first = put_evaluator(api, "answer-format", {"type": "regex", "pattern": r"^\d+$"})
    assert first["version"] == 1
    assert first["definition"] == {
        "type": "regex",
        "name": "answer-format",  # the score's name defaults to the evaluator's
        "pattern": r"^\d+$",
    }
    again = put_evaluator(api, "answer-format", {"type": "regex", "pattern": r"^\d+$"})
    assert again["version"] == 1 and len(again["versions"]) == 1
    changed = put_evaluator(
        api, "answer-format", {"type": "regex", "pattern": r"\d", "name": "has_digit"}
    )
    assert changed["version"] == 2
    assert [v["version"] for v in changed["versions"]] == [2, 1]
    assert changed["versions"][1]["definition"]["pattern"] == r"^\d+$"
    put_evaluator(api, "exact", {"type": "exact_match"})

    listed = api.get("/v1/evaluators").json()["data"]
    assert [(e["name"], e["version"], e["type"]) for e in listed] == [
        ("answer-format", 2, "regex"),
        ("exact", 1, "exact_match"),
    ]
    one = api.get("/v1/evaluators/answer-format").json()["data"]
    assert one["definition"] == {"type": "regex", "name": "has_digit", "pattern": r"\d"}
    assert one["created_at"] == one["versions"][1]["created_at"]


def test_an_unknown_evaluator_is_404(api: TestClient) -> None:
    details = assert_error(api.get("/v1/evaluators/nope"), 404, "EVALUATOR_NOT_FOUND")
    assert details["evaluator"] == "nope"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "telepathy"}, "type"),
        ({}, "type"),
        ({"type": "regex"}, "pattern"),
        ({"type": "regex", "pattern": "("}, "pattern"),
        ({"type": "exact_match", "pattern": "x"}, "pattern"),
        ({"type": "llm_judge"}, "prompt"),
        ({"type": "llm_judge", "prompt": "judge", "categories": {"good": "yes"}}, "categories"),
        ({"type": "exact_match", "name": "has space"}, "name"),
        ({"type": "exact_match", "evaluator": "other"}, "evaluator"),
    ],
)
def test_a_bad_definition_is_a_400_naming_its_field(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    assert_error(api.put("/v1/evaluators/e", json=body), 400, "VALIDATION_ERROR", field)
    assert_error(api.get("/v1/evaluators/e"), 404, "EVALUATOR_NOT_FOUND")


def test_a_bad_name_or_body_is_a_400(api: TestClient) -> None:
    assert_error(
        api.put("/v1/evaluators/has%20space", json={"type": "exact_match"}),
        400,
        "VALIDATION_ERROR",
        "name",
    )
    assert_error(api.put("/v1/evaluators/e", json=["exact_match"]), 400, "VALIDATION_ERROR")
    bad_json = api.put(
        "/v1/evaluators/e", content=b"{", headers={"content-type": "application/json"}
    )
    assert_error(bad_json, 400, "VALIDATION_ERROR", "body")


def test_an_experiment_scores_with_the_named_evaluator_s_version(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = "Paris"
    post(runs_api, "/v1/prompts", {"name": "capital", "template": "Capital of {c}?",
                                    "model": "gpt-4o-mini"})  # fmt: skip
    post(runs_api, "/v1/datasets", {"name": "capitals"})
    items = [{"id": "fr", "input_variables": {"c": "France"}, "expected_output": "Paris"}]
    post(runs_api, "/v1/datasets/capitals/items", {"items": items})
    put_evaluator(runs_api, "paris", {"type": "contains", "name": "says_paris"})
    put_evaluator(runs_api, "paris", {"type": "regex", "pattern": "^London$", "name": "says_paris"})

    newest = post(runs_api, "/v1/experiments",
                  {"dataset": "capitals", "prompt": "capital",
                   "evaluators": [{"evaluator": "paris"}]})  # fmt: skip
    pinned = post(runs_api, "/v1/experiments",
                  {"dataset": "capitals", "prompt": "capital",
                   "evaluators": [{"evaluator": "paris", "version": 1}]})  # fmt: skip
    # A later version changes neither: each was fixed when it started.
    put_evaluator(runs_api, "paris", {"type": "exact_match", "name": "says_paris"})

    for made, version, verdict in ((newest, 2, False), (pinned, 1, True)):
        done = finished(runs_api, made["id"])
        assert done["status"] == "completed", done
        (evaluator,) = done["evaluators"]
        assert evaluator["evaluator"] == "paris"
        assert evaluator["evaluator_version"] == version
        (result,) = results(runs_api, made["id"])
        assert result["scores"] == {"says_paris": verdict}
        scores = runs_api.get("/v1/scores", params={"request_id": result["request_id"]})
        (score,) = scores.json()["data"]
        assert score["metadata"]["evaluator"] == "paris"
        assert score["metadata"]["evaluator_version"] == version
        assert score["metadata"]["experiment_id"] == made["id"]


def test_an_experiment_naming_an_unknown_evaluator_or_version_is_404(
    runs_api: TestClient,
) -> None:
    post(runs_api, "/v1/prompts", {"name": "capital", "template": "Capital of {c}?",
                                    "model": "gpt-4o-mini"})  # fmt: skip
    post(runs_api, "/v1/datasets", {"name": "capitals"})
    put_evaluator(runs_api, "paris", {"type": "contains"})
    body: dict[str, Any] = {"dataset": "capitals", "prompt": "capital"}
    unknown = runs_api.post("/v1/experiments", json={**body, "evaluators": [{"evaluator": "x"}]})
    assert assert_error(unknown, 404, "EVALUATOR_NOT_FOUND")["evaluator"] == "x"
    no_version = runs_api.post(
        "/v1/experiments", json={**body, "evaluators": [{"evaluator": "paris", "version": 7}]}
    )
    assert assert_error(no_version, 404, "EVALUATOR_NOT_FOUND")["version"] == 7
    for bad in ({"evaluator": "paris", "type": "contains"}, {"evaluator": "paris", "version": 0}):
        response = runs_api.post("/v1/experiments", json={**body, "evaluators": [bad]})
        assert_error(response, 400, "VALIDATION_ERROR", "evaluators")
    assert runs_api.get("/v1/experiments").json()["data"] == []


def test_another_project_sees_none_of_a_project_s_evaluators(
    api: TestClient, other: TestClient
) -> None:
    put_evaluator(api, "exact", {"type": "exact_match"})
    assert other.get("/v1/evaluators").json()["data"] == []
    assert_error(other.get("/v1/evaluators/exact"), 404, "EVALUATOR_NOT_FOUND")
    # Its own evaluator of the same name starts at version 1.
    assert put_evaluator(other, "exact", {"type": "contains"})["version"] == 1
    assert api.get("/v1/evaluators/exact").json()["data"]["type"] == "exact_match"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"type": "regex", "pattern": "a\\ud800"}', "pattern"),
        ('{"type": "llm_judge", "prompt": "p", "categories": {"\\udfff": 1}}', "categories"),
        ('{"type": "llm_judge", "prompt": "p", "categories": {"good": NaN}}', "categories"),
        ('{"type": "llm_judge", "prompt": "p", "categories": {"good": Infinity}}', "categories"),
    ],
)
def test_text_that_cannot_be_stored_and_numbers_that_are_none_are_a_400(
    api: TestClient, text: str, field: str
) -> None:
    response = api.put(
        "/v1/evaluators/e", content=text.encode(), headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert api.get("/v1/evaluators").json()["data"] == []


def test_an_experiment_s_inline_evaluator_with_a_lone_surrogate_is_a_400(api: TestClient) -> None:
    post(api, "/v1/datasets", {"name": "d"})
    text = (
        '{"dataset": "d", "task": "client", '
        '"evaluators": [{"type": "regex", "pattern": "\\ud800"}]}'
    )
    response = api.post(
        "/v1/experiments", content=text.encode(), headers={"content-type": "application/json"}
    )
    assert assert_error(response, 400, "VALIDATION_ERROR", "evaluators")["index"] == 0
    assert api.get("/v1/experiments").json()["data"] == []
