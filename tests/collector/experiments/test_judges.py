"""A judge that cannot give its verdict is never silent (issue 47 point 3): a judge prompt
using a variable a judge is not given is refused when the experiment is created, and a judge
that fails while the experiment runs makes its result an error that the results, the counts
and the experiment's detail show. Real collector (ASGI), the runs against the OpenAI and
Anthropic wire stubs."""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.collector.models.experiments import ExperimentIn
from promptrail.collector.services.container import Services
from promptrail.testing import AnthropicStub, OpenAIStub
from tests.collector.contract import assert_error
from tests.collector.experiments.steps import finished, post, results

REPLY = "Score: 4. Paris"
ITEMS = [
    {"id": "fr", "input_variables": {"country": "France"}, "expected_output": "Paris"},
    {"id": "uk", "input_variables": {"country": "UK"}, "expected_output": "London"},
]


def _prompt(api: TestClient, name: str, template: str, model: str = "gpt-4o-mini") -> None:
    post(api, "/v1/prompts", {"name": name, "template": template, "model": model})


def _setup(api: TestClient, judge_template: str, judge_model: str = "gpt-4o-mini") -> None:
    _prompt(api, "capital", "Capital of {country}?")
    _prompt(api, "judge", judge_template, judge_model)
    post(api, "/v1/datasets", {"name": "capitals"})
    assert post(api, "/v1/datasets/capitals/items", {"items": ITEMS})["rejected"] == []


JUDGED = {
    "dataset": "capitals",
    "prompt": "capital",
    "concurrency": 1,
    "evaluators": [
        {"type": "exact_match"},
        {"type": "llm_judge", "prompt": "judge", "name": "grade"},
    ],
}


def test_a_judge_prompt_using_another_variable_is_refused_at_create(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _setup(runs_api, "Grade {answer} for {input} from 1-5")
    response = runs_api.post("/v1/experiments", json=JUDGED)
    details = assert_error(response, 400, "VALIDATION_ERROR", "evaluators")
    message = response.json()["error"]["message"]
    assert "'grade'" in message and "'answer'" in message
    assert "input, output, expected_output" in message
    assert details["evaluator"] == "grade" and details["variables"] == ["answer"]
    # Nothing ran and nothing was stored.
    assert openai_stub.calls == []
    assert runs_api.get("/v1/experiments").json()["data"] == []


def test_the_judge_s_three_variables_are_accepted(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = REPLY
    _setup(runs_api, "Grade {output} against {expected_output} for {input} from 1-5")
    made = post(runs_api, "/v1/experiments", JUDGED)
    done = finished(runs_api, made["id"])
    assert (done["status"], done["error"], done["counts"]["errors"]) == ("completed", None, 0)
    assert [r["scores"]["grade"] for r in results(runs_api, made["id"])] == [4.0, 4.0]


def test_a_judge_whose_provider_fails_makes_its_result_an_error_counted_and_shown(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    openai_stub.script.reply = REPLY
    anthropic_stub.script.reply = "4"
    anthropic_stub.script.failures = [400]  # the first judge call only
    _setup(runs_api, "Grade {output} from 1-5", judge_model="claude-3-5-haiku-latest")
    made = post(runs_api, "/v1/experiments", JUDGED)
    done = finished(runs_api, made["id"])
    assert done["status"] == "completed"
    assert done["counts"] == {"items": 2, "runs": 2, "done": 2, "errors": 1}
    assert "judge 'grade' failed" in done["error"] and "1 time(s)" in done["error"]
    failed, judged = results(runs_api, made["id"])
    assert failed["status"] == "error" and failed["error"].startswith("judge 'grade' failed:")
    # The run itself succeeded: its output, record and other verdicts stay.
    assert failed["output"] == REPLY and failed["request_id"]
    assert failed["scores"] == {"exact_match": False}
    assert judged["status"] == "success" and judged["error"] is None
    assert judged["scores"] == {"exact_match": False, "grade": 4.0}
    assert done["summary"]["scores"]["grade"]["count"] == 1


def test_a_judge_prompt_changed_after_create_fails_its_results_by_name(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = REPLY
    _setup(runs_api, "Grade {output} from 1-5")
    services: Services = runs_api.app.state.services  # type: ignore[attr-defined]
    # Created (and checked) as the route does, then the judge's newest version gains a
    # variable before the runs start: the judge cannot render any more.
    row, items = services.experiments.create("default", ExperimentIn.model_validate(JUDGED))
    patched = runs_api.patch("/v1/prompts/judge", json={"template": "Grade {output} by {rubric}"})
    assert patched.status_code == 200, patched.text

    async def start() -> None:
        services.experiments.start("default", row, items)

    runs_api.portal.call(start)  # type: ignore[union-attr]
    done = finished(runs_api, row.id)
    assert done["status"] == "completed" and done["counts"]["errors"] == 2
    rows = results(runs_api, row.id)
    assert [r["status"] for r in rows] == ["error", "error"]
    for result in rows:
        assert "judge 'grade' failed" in result["error"] and "rubric" in result["error"]
        assert result["output"] == REPLY and "grade" not in result["scores"]
    assert "2 time(s)" in done["error"]
    # Only the two task runs reached the provider.
    assert len(openai_stub.calls) == 2


def test_judge_categories_are_a_map_of_name_to_number_a_list_is_refused(
    runs_api: TestClient,
) -> None:
    _setup(runs_api, "Is {output} right? Say good or bad")
    judge = {"type": "llm_judge", "prompt": "judge", "categories": ["good", "bad"]}
    response = runs_api.post("/v1/experiments", json={**JUDGED, "evaluators": [judge]})
    assert_error(response, 400, "VALIDATION_ERROR", "evaluators")
    assert "categories map each category's name to a number" in response.json()["error"]["message"]
    judge["categories"] = {"good": 1, "bad": 0}
    assert post(runs_api, "/v1/experiments", {**JUDGED, "evaluators": [judge]})["evaluators"] == [
        {"type": "llm_judge", "name": "llm_judge", "prompt": "judge",
         "categories": {"good": 1.0, "bad": 0.0}}
    ]  # fmt: skip
