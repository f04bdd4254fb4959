"""An experiment's verdicts are scores like any other (issue 46 point 1): written through the
score service, so a score name's config applies to them as it does to a posted score. Real
collector over HTTP, the OpenAI wire stub behind the runs."""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.testing import OpenAIStub
from tests.collector.experiments.steps import finished, post

REPLY = "Paris"


def test_a_verdict_outside_its_score_config_stays_in_the_result_but_is_no_score(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = REPLY
    post(runs_api, "/v1/prompts", {"name": "capital", "template": "Capital of {c}?",
                                    "model": "gpt-4o-mini"})  # fmt: skip
    post(runs_api, "/v1/datasets", {"name": "capitals"})
    items = [{"id": "fr", "input_variables": {"c": "France"}, "expected_output": REPLY}]
    post(runs_api, "/v1/datasets/capitals/items", {"items": items})
    # A config the similarity verdict (1.0) lies outside of; exact_match has none.
    config = runs_api.put("/v1/score-configs/similarity",
                          json={"data_type": "numeric", "min": 0, "max": 0.5})  # fmt: skip
    assert config.status_code == 200, config.text
    made = post(
        runs_api,
        "/v1/experiments",
        {"dataset": "capitals", "prompt": "capital",
         "evaluators": [{"type": "exact_match"}, {"type": "similarity"}]},
    )  # fmt: skip
    assert finished(runs_api, made["id"])["status"] == "completed"
    (result,) = runs_api.get(f"/v1/experiments/{made['id']}/results").json()["data"]
    assert result["scores"] == {"exact_match": True, "similarity": 1.0}
    # The same rule as POST /v1/scores: the record gets the verdict that fits.
    refused = runs_api.post(
        "/v1/scores",
        json={"request_id": result["request_id"], "name": "similarity", "value": 1.0},
    )
    assert refused.status_code == 400
    scores = runs_api.get("/v1/scores", params={"request_id": result["request_id"]}).json()
    assert {(s["name"], s["value"], s["source"]) for s in scores["data"]} == {
        ("exact_match", True, "eval")
    }
