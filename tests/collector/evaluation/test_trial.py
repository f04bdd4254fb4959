"""Trying an evaluator on a few records before saving it (docs/api-notes.md, "Online
evaluation"; issue 50 point 5): the verdicts a rule would give, with the mapping's values,
nothing written; bad input a 400 naming the field. Real chDB, the app over ASGI."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.collector.contract import assert_error


def _log(api: TestClient, rid: str, content: str, **fields: Any) -> None:
    record = {
        "id": rid,
        "prompt_name": "greet",
        "model": "gpt-4o-mini",
        "status": "success",
        "input_variables": {"name": rid, "expected": "hello"},
        "output": {"content": content},
        **fields,
    }
    response = api.post("/v1/requests/batch", json={"records": [record]})
    assert response.status_code < 300, response.text


def _try(api: TestClient, body: dict[str, Any]) -> Any:
    return api.post("/v1/evaluators/try", json=body)


def test_a_code_evaluator_is_tried_on_records_without_saving_anything(api: TestClient) -> None:
    _log(api, "req_json", '{"ok": true}')
    _log(api, "req_text", "not json")
    answer = _try(
        api,
        {
            "evaluator": {"type": "json_valid", "name": "is-json"},
            "request_ids": ["req_json", "req_text", "req_missing"],
        },
    )
    assert answer.status_code == 200, answer.text
    by_id = {item["request_id"]: item for item in answer.json()["data"]}
    assert [item["request_id"] for item in answer.json()["data"]] == [
        "req_json",
        "req_text",
        "req_missing",
    ]
    assert by_id["req_json"]["value"] is True and by_id["req_json"]["error"] is None
    assert by_id["req_text"]["value"] is False
    # The rule's default mapping: the input variables (no input), the output's content.
    assert by_id["req_json"]["input"] == {"name": "req_json", "expected": "hello"}
    assert by_id["req_json"]["output"] == '{"ok": true}'
    assert by_id["req_missing"]["value"] is None and by_id["req_missing"]["error"]
    # Nothing was saved: no evaluator, no score.
    assert api.get("/v1/evaluators").json()["data"] == []
    detail = api.get("/v1/requests/req_json").json()["data"]
    assert detail["scores"] == [] and detail["evaluations"] == []


def test_a_mapping_gives_the_evaluator_its_input_output_and_expected(api: TestClient) -> None:
    _log(api, "req_hello", "hello")
    _log(api, "req_bye", "bye")
    answer = _try(
        api,
        {
            "evaluator": {"type": "exact_match"},
            "request_ids": ["req_hello", "req_bye"],
            "mapping": {
                "input": "input_variables.name",
                "output": "output.content",
                "expected": "input_variables.expected",
            },
        },
    )
    assert answer.status_code == 200, answer.text
    hello, bye = answer.json()["data"]
    assert (hello["input"], hello["output"], hello["expected"]) == ("req_hello", "hello", "hello")
    assert hello["value"] is True and bye["value"] is False
    # Without an expected output exact_match has nothing to compare with: the rule's error.
    unmapped = _try(api, {"evaluator": {"type": "exact_match"}, "request_ids": ["req_hello"]})
    item = unmapped.json()["data"][0]
    assert item["value"] is None and "expected" in item["error"]


def test_records_of_another_project_are_not_found(api: TestClient, other: TestClient) -> None:
    _log(api, "req_mine", "hello")
    answer = _try(other, {"evaluator": {"type": "json_valid"}, "request_ids": ["req_mine"]})
    assert answer.status_code == 200, answer.text
    item = answer.json()["data"][0]
    assert item["value"] is None and item["output"] is None and item["error"]


def test_bad_input_is_a_400_naming_the_field(api: TestClient) -> None:
    assert_error(
        _try(api, {"evaluator": {"type": "nope"}, "request_ids": ["r"]}),
        400,
        "VALIDATION_ERROR",
        "evaluator",
    )
    assert_error(
        _try(api, {"evaluator": {"type": "regex", "pattern": "("}, "request_ids": ["r"]}),
        400,
        "VALIDATION_ERROR",
        "evaluator",
    )
    # A judge can be tried (tests/collector/evaluation/test_trial_judges.py), not one
    # without its prompt.
    assert_error(
        _try(api, {"evaluator": {"type": "llm_judge"}, "request_ids": ["r"]}),
        400,
        "VALIDATION_ERROR",
        "evaluator",
    )
    assert_error(
        _try(api, {"evaluator": {"type": "json_valid"}, "request_ids": []}),
        400,
        "VALIDATION_ERROR",
        "request_ids",
    )
    too_many = [f"r{i}" for i in range(21)]
    assert_error(
        _try(api, {"evaluator": {"type": "json_valid"}, "request_ids": too_many}),
        400,
        "VALIDATION_ERROR",
        "request_ids",
    )
    assert_error(
        _try(
            api,
            {
                "evaluator": {"type": "json_valid"},
                "request_ids": ["r"],
                "mapping": {"input": "input", "output": "nowhere"},
            },
        ),
        400,
        "VALIDATION_ERROR",
        "mapping",
    )
    for body in ([], {"evaluator": "x", "request_ids": ["r"]}, {"request_ids": ["r"]}):
        response = _try(api, body)
        assert response.status_code == 400, response.text
