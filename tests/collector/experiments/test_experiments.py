"""Experiments on the service (docs/api-notes.md, "Datasets and experiments"; issue 33 points 2-3):
a prompt version over a dataset through the runs path, against the OpenAI wire stub on a real
socket; evaluators, errors, cancel, counts and summaries."""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.models.runs import RunRequest
from promptrail.collector.services.container import Services
from promptrail.collector.services.runs import RunTarget
from promptrail.collector.store.request_rows import RequestRow
from promptrail.testing import OpenAIStub
from tests.collector.contract import assert_error
from tests.collector.experiments.steps import finished, post, results

REPLY = "Score: 4. Paris"


@pytest.fixture(autouse=True)
def _reply(openai_stub: OpenAIStub) -> None:
    openai_stub.script.reply = REPLY


def setup_dataset(api: TestClient, items: list[dict[str, Any]], name: str = "capitals") -> None:
    post(api, "/v1/datasets", {"name": name})
    result = post(api, f"/v1/datasets/{name}/items", {"items": items})
    assert result["rejected"] == []


def prompt(api: TestClient, name: str = "capital", template: str = "Capital of {country}?") -> None:
    post(api, "/v1/prompts", {"name": name, "template": template, "model": "gpt-4o-mini"})


def slow_experiment(
    api: TestClient, stub: OpenAIStub, items: int, delay: float, concurrency: int
) -> dict[str, Any]:
    """Start an experiment of ``capital`` over ``items`` items, each run answered after
    ``delay`` seconds; return it as made."""
    prompt(api)
    many = [{"id": f"i{n:02d}", "input_variables": {"country": f"c{n}"}} for n in range(items)]
    setup_dataset(api, many)
    stub.script.first_byte_delay = delay
    body = {"dataset": "capitals", "prompt": "capital", "concurrency": concurrency}
    made: dict[str, Any] = post(api, "/v1/experiments", body)
    return made


ITEMS = [
    {"id": "fr", "input_variables": {"country": "France"}, "expected_output": REPLY},
    {"id": "uk", "input_variables": {"country": "UK"}, "expected_output": "London"},
    {"id": "bad", "input_variables": {"land": "Spain"}, "expected_output": "Madrid"},
]


def test_a_version_runs_over_the_dataset_with_repetitions_evaluated_and_summarised(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    prompt(runs_api)
    setup_dataset(runs_api, ITEMS)
    made = post(
        runs_api,
        "/v1/experiments",
        {
            "name": "v1 on capitals",
            "dataset": "capitals",
            "prompt": "capital",
            "evaluators": [
                {"type": "exact_match"},
                {"type": "contains", "name": "has_answer"},
                {"type": "regex", "pattern": r"Score: \d"},
                {"type": "json_valid"},
                {"type": "similarity"},
            ],
            "repetitions": 2,
            "concurrency": 3,
            "metadata": {"ticket": "T-1"},
        },
    )
    assert made["id"].startswith("exp_")
    assert (made["status"], made["dataset"], made["prompt_name"], made["version"]) == (
        "running",
        "capitals",
        "capital",
        1,
    )
    assert made["counts"]["items"] == 3 and made["counts"]["runs"] == 6
    done = finished(runs_api, made["id"])
    assert done["status"] == "completed" and done["completed_at"]
    assert done["counts"] == {"items": 3, "runs": 6, "done": 6, "errors": 2}
    # Six calls upstream would be wrong: the item without its variable never runs.
    assert len(openai_stub.calls) == 4

    rows = results(runs_api, made["id"], limit=4)
    assert [(r["item_id"], r["repetition"]) for r in rows] == [
        ("fr", 1), ("fr", 2), ("uk", 1), ("uk", 2), ("bad", 1), ("bad", 2),
    ]  # fmt: skip
    fr, uk, bad = rows[0], rows[2], rows[4]
    assert fr["output"] == REPLY and fr["status"] == "success"
    assert fr["scores"] == {
        "exact_match": True,
        "has_answer": True,
        "regex": True,
        "json_valid": False,
        "similarity": 1.0,
    }
    assert uk["scores"]["exact_match"] is False and 0 < uk["scores"]["similarity"] < 1
    assert bad["status"] == "error" and "country" in bad["error"] and bad["request_id"] is None
    assert bad["scores"] == {}
    assert fr["input_variables"] == {"country": "France"} and uk["expected_output"] == "London"

    # Each result is a record of its run, linked to its experiment and item, and each
    # verdict is a score (source eval) on it.
    record = runs_api.get(f"/v1/requests/{fr['request_id']}").json()["data"]
    assert record["metadata"]["experiment_id"] == made["id"]
    assert record["metadata"]["dataset_item_id"] == "fr"
    assert record["prompt_name"] == "capital"
    scores = runs_api.get("/v1/scores", params={"request_id": fr["request_id"]}).json()["data"]
    assert {s["name"]: (s["value"], s["source"]) for s in scores} == {
        "exact_match": (True, "eval"),
        "has_answer": (True, "eval"),
        "regex": (True, "eval"),
        "json_valid": (False, "eval"),
        "similarity": (1.0, "eval"),
    }

    summary = done["summary"]
    exact = summary["scores"]["exact_match"]
    # Four successful results: two true, two false; t(3) = 3.182.
    half = 3.182 * math.sqrt((4 * 0.25) / 3) / 2
    assert exact["count"] == 4 and exact["mean"] == 0.5
    # The t interval, 0.5 ± 0.92, cut to the [0, 1] a boolean's mean can take.
    assert half > 0.5
    assert (exact["ci_low"], exact["ci_high"]) == (0.0, 1.0)
    assert summary["scores"]["regex"] == {"mean": 1.0, "ci_low": 1.0, "ci_high": 1.0, "count": 4}
    assert summary["estimated_cost_usd"] == pytest.approx(
        sum(r["estimated_cost_usd"] for r in rows)
    )
    assert summary["estimated_cost_usd"] > 0 and summary["judge_cost_usd"] == 0
    assert summary["total_tokens"] > 0
    assert summary["latency_ms"]["p50"] is not None and summary["latency_ms"]["p95"] is not None

    # Listed by dataset (name or id) and prompt.
    listed = runs_api.get("/v1/experiments", params={"dataset": done["dataset_id"]}).json()
    assert [e["id"] for e in listed["data"]] == [made["id"]]
    listed = runs_api.get("/v1/experiments", params={"prompt_name": "other"}).json()
    assert listed["data"] == []


def test_a_provider_failure_is_an_error_result_and_the_others_run(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    prompt(runs_api)
    setup_dataset(runs_api, ITEMS[:2])
    openai_stub.script.failures = [400]
    made = post(
        runs_api,
        "/v1/experiments",
        {"dataset": "capitals", "prompt": "capital", "concurrency": 1,
         "evaluators": [{"type": "exact_match"}]},
    )  # fmt: skip
    done = finished(runs_api, made["id"])
    assert done["status"] == "completed"
    assert done["counts"] == {"items": 2, "runs": 2, "done": 2, "errors": 1}
    first, second = results(runs_api, made["id"])
    assert first["status"] == "error" and first["error"] and first["request_id"]
    # The failed run's record is there too, an error linked to the experiment.
    record = runs_api.get(f"/v1/requests/{first['request_id']}").json()["data"]
    assert record["status"] == "error" and record["metadata"]["experiment_id"] == made["id"]
    assert second["status"] == "success"
    assert done["summary"]["scores"]["exact_match"]["count"] == 1


def test_an_llm_judge_scores_each_output_its_runs_are_records_and_cost_apart(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    prompt(runs_api)
    prompt(runs_api, "judge", "Grade {output} against {expected_output} for {input} from 1-5")
    setup_dataset(runs_api, ITEMS[:2])
    made = post(
        runs_api,
        "/v1/experiments",
        {
            "dataset": "capitals",
            "prompt": "capital",
            "evaluators": [
                {"type": "llm_judge", "prompt": "judge", "name": "grade"},
                {"type": "llm_judge", "prompt": "judge", "name": "verdict",
                 "categories": {"london": 0, "paris": 1}},
            ],
        },
    )  # fmt: skip
    done = finished(runs_api, made["id"])
    rows = results(runs_api, made["id"])
    assert [r["scores"] for r in rows] == [{"grade": 4.0, "verdict": 1.0}] * 2
    assert done["summary"]["scores"]["grade"]["mean"] == 4.0
    assert done["summary"]["judge_cost_usd"] > 0
    judge_calls = [c for c in openai_stub.calls if "Grade" in c.body["messages"][0]["content"]]
    assert len(judge_calls) == 4
    assert '{"country": "France"}' in judge_calls[0].body["messages"][0]["content"] or any(
        '{"country": "France"}' in c.body["messages"][0]["content"] for c in judge_calls
    )
    # An experiment's runs and judges are the service's own (issue 47 point 1).
    judged = runs_api.get(
        "/v1/requests",
        params={
            "metadata.experiment_id": made["id"],
            "prompt_name": "judge",
            "environment": "promptrail-experiment",
        },
    ).json()["data"]
    assert len(judged) == 4
    detail = runs_api.get(f"/v1/requests/{judged[0]['id']}").json()["data"]
    assert detail["metadata"]["judge_of"] in {r["request_id"] for r in rows}


def test_a_cancelled_experiment_stops_and_keeps_what_it_stored(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    made = slow_experiment(runs_api, openai_stub, items=20, delay=0.2, concurrency=1)
    deadline = time.monotonic() + 30
    while runs_api.get(f"/v1/experiments/{made['id']}").json()["data"]["counts"]["done"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    cancelled = post(runs_api, f"/v1/experiments/{made['id']}/cancel", {}, status=200)
    assert cancelled["status"] == "cancelled"
    time.sleep(0.6)
    after = runs_api.get(f"/v1/experiments/{made['id']}").json()["data"]
    assert after["status"] == "cancelled"
    assert 2 <= after["counts"]["done"] < 20
    assert after["counts"]["done"] == len(results(runs_api, made["id"]))
    time.sleep(0.5)
    assert runs_api.get(f"/v1/experiments/{made['id']}").json()["data"]["counts"] == after["counts"]
    # Cancelling again answers the experiment as it is.
    assert post(runs_api, f"/v1/experiments/{made['id']}/cancel", {}, 200)["status"] == "cancelled"


def test_a_label_model_and_parameters_choose_what_runs(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    prompt(runs_api)
    response = runs_api.patch(
        "/v1/prompts/capital", json={"template": "Name the capital of {country}.",
                                     "labels": ["production"]}
    )  # fmt: skip
    assert response.status_code == 200, response.text
    runs_api.patch("/v1/prompts/capital", json={"template": "v3 {country}"})
    setup_dataset(runs_api, ITEMS[:1])
    made = post(
        runs_api,
        "/v1/experiments",
        {"dataset": "capitals", "prompt": "capital", "label": "production",
         "model": "gpt-4.1-mini", "parameters": {"temperature": 0.7}},
    )  # fmt: skip
    assert (made["version"], made["label"], made["model"]) == (2, "production", "gpt-4.1-mini")
    finished(runs_api, made["id"])
    call = openai_stub.calls[-1].body
    assert call["model"] == "gpt-4.1-mini" and call["temperature"] == 0.7
    assert call["messages"][0]["content"] == "Name the capital of France."


def test_an_empty_dataset_completes_at_once(runs_api: TestClient) -> None:
    prompt(runs_api)
    post(runs_api, "/v1/datasets", {"name": "empty"})
    made = post(runs_api, "/v1/experiments", {"dataset": "empty", "prompt": "capital"})
    assert made["status"] == "completed"
    assert made["counts"] == {"items": 0, "runs": 0, "done": 0, "errors": 0}


def test_bad_experiments_get_the_contract_s_errors(runs_api: TestClient) -> None:
    prompt(runs_api)
    setup_dataset(runs_api, ITEMS[:1])
    ok = {"dataset": "capitals", "prompt": "capital"}

    def refused(status: int, code: str, field: str | None = None, **changes: Any) -> None:
        body = {**ok, **changes}
        assert_error(runs_api.post("/v1/experiments", json=body), status, code, field)

    refused(400, "VALIDATION_ERROR", "evaluators", evaluators=[{"type": "vibes"}])
    refused(400, "VALIDATION_ERROR", "evaluators", evaluators=[{"type": "regex", "pattern": "("}])
    refused(400, "VALIDATION_ERROR", "evaluators", evaluators=[{"type": "regex"}])
    refused(400, "VALIDATION_ERROR", "evaluators", evaluators=["exact_match"])
    refused(400, "VALIDATION_ERROR", "evaluators",
            evaluators=[{"type": "exact_match"}, {"type": "exact_match"}])  # fmt: skip
    refused(400, "VALIDATION_ERROR", "evaluators", evaluators=[{"type": "llm_judge"}])
    refused(404, "PROMPT_NOT_FOUND", evaluators=[{"type": "llm_judge", "prompt": "nobody"}])
    refused(400, "VALIDATION_ERROR", "repetitions", repetitions=11)
    refused(400, "VALIDATION_ERROR", "repetitions", repetitions=0)
    refused(400, "VALIDATION_ERROR", "concurrency", concurrency=33)
    refused(400, "VALIDATION_ERROR", "concurrency", concurrency=0)
    refused(400, "VALIDATION_ERROR", "label", version=1, label="production")
    refused(400, "VALIDATION_ERROR", "model", model="llama-3")
    refused(400, "VALIDATION_ERROR", "prompt", prompt=None)
    # No field can point a run at a provider URL of the client's choosing.
    refused(400, "VALIDATION_ERROR", "base_url", base_url="http://evil.example")
    refused(404, "DATASET_NOT_FOUND", dataset="nothing")
    refused(404, "PROMPT_NOT_FOUND", prompt="nothing")
    refused(404, "VERSION_NOT_FOUND", version=9)
    refused(404, "LABEL_NOT_FOUND", label="nothing")
    for path in ("/v1/experiments/exp_x", "/v1/experiments/exp_x/results"):
        assert_error(runs_api.get(path), 404, "EXPERIMENT_NOT_FOUND")
    assert_error(runs_api.post("/v1/experiments/exp_x/cancel"), 404, "EXPERIMENT_NOT_FOUND")
    assert_error(
        runs_api.get("/v1/experiments/compare", params={"base": "exp_x", "candidate": "exp_y"}),
        404,
        "EXPERIMENT_NOT_FOUND",
    )
    assert_error(runs_api.get("/v1/experiments/compare"), 400, "VALIDATION_ERROR")
    assert_error(
        runs_api.get("/v1/experiments", params={"cursor": "junk"}),
        400,
        "VALIDATION_ERROR",
        "cursor",
    )
    assert_error(
        runs_api.get("/v1/experiments", params={"dataset": "nothing"}), 404, "DATASET_NOT_FOUND"
    )
    assert runs_api.get("/v1/experiments").json()["data"] == []


def test_every_visible_result_has_its_record_stored_the_in_flight_one_at_a_cancel_too(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    # A run's record is stored by the experiment's writer with the results, before them:
    # a request-log read does not wait for it, so a result is never seen before its record.
    made = slow_experiment(runs_api, openai_stub, items=30, delay=0.05, concurrency=4)
    checked: set[str] = set()
    deadline = time.monotonic() + 30
    while len(checked) < 12:
        assert time.monotonic() < deadline
        for row in results(runs_api, made["id"]):
            if row["request_id"] not in checked:
                record = runs_api.get(f"/v1/requests/{row['request_id']}")
                assert record.status_code == 200, record.text
                assert record.json()["data"]["metadata"]["dataset_item_id"] == row["item_id"]
                checked.add(row["request_id"])
    post(runs_api, f"/v1/experiments/{made['id']}/cancel", {}, status=200)
    time.sleep(0.5)
    stored = results(runs_api, made["id"])
    records = runs_api.get(
        "/v1/requests",
        params={"metadata.experiment_id": made["id"], "limit": 100, "environment": "all"},
    ).json()["data"]
    ids = {r["id"] for r in records}
    assert {r["request_id"] for r in stored} <= ids
    # Runs cut short by the cancel have no result, but their records say so.
    cut = [r for r in records if r["id"] not in {s["request_id"] for s in stored}]
    assert all(r["status"] == "error" for r in cut)


def test_a_run_s_record_kept_by_its_caller_is_stored_by_it_not_written_behind(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    prompt(runs_api)
    services: Services = runs_api.app.state.services  # type: ignore[attr-defined]
    kept: list[RequestRow] = []

    async def run() -> Any:
        body = RunRequest(variables={"country": "France"}, metadata={"kept": True})
        prepared = await services.runs.prepare("default", RunTarget("capital"), body)
        return await services.runs.complete(prepared, kept.append)

    answer = runs_api.portal.call(run)  # type: ignore[union-attr]
    assert [(r.id, r.latency_ms, r.status) for r in kept] == [
        (answer.id, answer.latency_ms, "success")
    ]
    # Handed over, not written behind: the log (which waits for write-behind) lacks it...
    assert runs_api.get(f"/v1/requests/{answer.id}").status_code == 404
    # ...until its keeper stores it, in one insert with whatever else it kept.
    services.runs.store_records("default", kept)
    record = runs_api.get(f"/v1/requests/{answer.id}").json()["data"]
    assert record["metadata"] == {"kept": True} and record["output"]["content"] == REPLY

    # A provider failure's record is kept too (the caller makes it an error result).
    openai_stub.script.failures = [400]
    kept.clear()
    with pytest.raises(Exception, match="HTTP 400"):
        runs_api.portal.call(run)  # type: ignore[union-attr]
    assert [r.status for r in kept] == ["error"]


def test_a_run_logs_no_line_per_provider_call(
    runs_api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    # httpx's INFO line per request ("HTTP Request: POST ...") cost the event loop a
    # formatted line and a write per run, and says less than the run's record.
    prompt(runs_api)
    caplog.set_level(logging.INFO)
    response = runs_api.post("/v1/prompts/capital/run", json={"variables": {"country": "F"}})
    assert response.status_code == 200, response.text
    assert [r.getMessage() for r in caplog.records if r.name == "httpx"] == []


def test_a_log_that_refuses_the_records_loses_no_result_and_gets_them_later(
    runs_api: TestClient, openai_stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    # The writer stores a batch's records first; a request log refusing inserts (ClickHouse's
    # own TOO_MANY_PARTS, collector/store/faults.py) hands them to the write-behind pool,
    # retried, and the results are written all the same.
    services: Services = runs_api.app.state.services  # type: ignore[attr-defined]
    prompt(runs_api, "warm")
    first = runs_api.post("/v1/prompts/warm/run", json={"variables": {"country": "F"}})
    assert first.status_code == 200  # the log's table holds a part: the stall applies
    services.records.settle()  # (once the journal stored it)
    services.faults.stall("fail", 0)
    services.records.probe()  # the log knows at once that it fails, as after a failed insert
    try:
        made = slow_experiment(runs_api, openai_stub, items=6, delay=0.02, concurrency=2)
        done = finished(runs_api, made["id"])
        assert done["status"] == "completed"
        assert done["counts"] == {"items": 6, "runs": 6, "done": 6, "errors": 0}
    finally:
        services.faults.resume()
    refused = [r for r in caplog.records if "run records not stored at once" in r.getMessage()]
    assert refused, "the stall never refused the experiment's records"
    for row in results(runs_api, made["id"]):
        # A read of the log waits for the write-behind records (retried at Retry-After).
        record = runs_api.get(f"/v1/requests/{row['request_id']}")
        assert record.status_code == 200, record.text
        assert record.json()["data"]["metadata"]["dataset_item_id"] == row["item_id"]
