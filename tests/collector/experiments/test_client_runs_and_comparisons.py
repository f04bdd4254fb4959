"""Experiments run by the client's code, and comparisons paired by item (docs/api-notes.md,
"Datasets and experiments"; issue 33 point 4): deltas with 95% intervals,
improved/regressed/unchanged, regressions first."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.services.intervals import mean_interval, t_975
from tests.collector.contract import assert_error
from tests.collector.experiments.steps import post


def client_experiment(api: TestClient, name: str, scores: dict[str, float], **extra: Any) -> str:
    """A client experiment whose item ``i`` scored ``scores[i]`` (output ``<name>-<i>``)."""
    made = post(api, "/v1/experiments", {"dataset": "qa", "task": "client", "name": name, **extra})
    assert made["task"] == "client" and made["status"] == "running"
    result = post(
        api,
        f"/v1/experiments/{made['id']}/results",
        {
            "results": [
                {"item_id": item, "repetition": 1, "output": f"{name}-{item}",
                 "scores": {"quality": value, "tone": "warm"}, "latency_ms": 10 + n,
                 "estimated_cost_usd": 0.001}
                for n, (item, value) in enumerate(scores.items())
            ]
        },
    )  # fmt: skip
    assert result == {"accepted": len(scores), "rejected": []}
    done = post(api, f"/v1/experiments/{made['id']}/complete", {}, status=200)
    assert done["status"] == "completed" and done["counts"]["done"] == len(scores)
    experiment_id: str = made["id"]
    return experiment_id


@pytest.fixture
def qa(api: TestClient) -> TestClient:
    post(api, "/v1/datasets", {"name": "qa"})
    items = [{"id": f"i{n}", "input_variables": {"n": n}, "expected_output": "x"} for n in range(6)]
    post(api, "/v1/datasets/qa/items", {"items": items})
    return api


BASE = {"i0": 0.5, "i1": 0.5, "i2": 0.5, "i3": 0.5, "i4": 0.9}
CANDIDATE = {"i0": 0.9, "i1": 0.7, "i2": 0.5, "i3": 0.1, "i5": 0.3}


def test_two_experiments_compare_paired_by_item_with_the_interval_of_the_mean_delta(
    qa: TestClient,
) -> None:
    base = client_experiment(qa, "base", BASE)
    candidate = client_experiment(qa, "candidate", CANDIDATE)
    response = qa.get("/v1/experiments/compare", params={"base": base, "candidate": candidate})
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    # Paired: i0..i3; i4 and i5 are each on one side only.
    assert data["unmatched"] == 2
    deltas = [0.4, 0.2, 0.0, -0.4]
    mean = sum(deltas) / 4
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / 3)
    quality = data["scores"]["quality"]
    assert quality["base"] == pytest.approx(0.5)
    assert quality["candidate"] == pytest.approx(0.55)
    assert quality["delta"] == pytest.approx(mean)
    assert quality["ci_low"] == pytest.approx(mean - t_975(3) * sd / 2)
    assert quality["ci_high"] == pytest.approx(mean + t_975(3) * sd / 2)
    # ClickHouse's aggregates give the interval the reference formula gives.
    reference = mean_interval(deltas)
    assert reference is not None
    assert (quality["ci_low"], quality["ci_high"]) == pytest.approx(
        (reference.ci_low, reference.ci_high)
    )
    assert (quality["improved"], quality["regressed"], quality["unchanged"]) == (2, 1, 1)
    # A text score is shown, not averaged or compared.
    assert "tone" not in data["scores"]
    assert data["estimated_cost_usd"]["base"] == pytest.approx(0.005)
    assert data["estimated_cost_usd"]["delta"] == pytest.approx(0.0)
    assert data["latency_ms"] == {"base": 12.0, "candidate": 12.0, "delta": 0.0}
    # The largest regression first, then by item order.
    assert [i["item_id"] for i in data["items"]] == ["i3", "i2", "i1", "i0"]
    worst = data["items"][0]
    assert worst["base"] == {"output": "base-i3", "scores": {"quality": 0.5, "tone": "warm"}}
    assert worst["candidate"]["output"] == "candidate-i3"
    assert worst["delta"]["quality"] == pytest.approx(-0.4)
    assert worst["input_variables"] == {"n": 3} and worst["expected_output"] == "x"

    # Items come in pages.
    first = qa.get(
        "/v1/experiments/compare", params={"base": base, "candidate": candidate, "limit": 3}
    ).json()
    assert [i["item_id"] for i in first["data"]["items"]] == ["i3", "i2", "i1"]
    rest = qa.get(
        "/v1/experiments/compare",
        params={"base": base, "candidate": candidate, "limit": 3,
                "cursor": first["pagination"]["next_cursor"]},
    ).json()  # fmt: skip
    assert [i["item_id"] for i in rest["data"]["items"]] == ["i0"]
    assert rest["pagination"] == {"has_more": False}


def test_repetitions_are_averaged_per_item_before_pairing(qa: TestClient) -> None:
    base = client_experiment(qa, "base", {"i0": 0.0, "i1": 1.0})
    made = post(qa, "/v1/experiments", {"dataset": "qa", "task": "client", "repetitions": 2})
    post(
        qa,
        f"/v1/experiments/{made['id']}/results",
        {"results": [
            {"item_id": "i0", "repetition": 1, "scores": {"quality": 1}},
            {"item_id": "i0", "repetition": 2, "scores": {"quality": 0}},
            {"item_id": "i1", "repetition": 1, "scores": {"quality": True}},
            {"item_id": "i1", "repetition": 2, "scores": {"quality": True}},
        ]},
    )  # fmt: skip
    data = qa.get("/v1/experiments/compare", params={"base": base, "candidate": made["id"]}).json()[
        "data"
    ]
    assert data["scores"]["quality"]["delta"] == pytest.approx(0.25)
    assert {i["item_id"]: i["delta"]["quality"] for i in data["items"]} == {"i0": 0.5, "i1": 0.0}


def test_client_results_replace_by_item_and_repetition_and_bad_ones_are_rejected(
    qa: TestClient,
) -> None:
    record = qa.post("/v1/requests", json={"id": "req_task_1", "model": "gpt-4o-mini"})
    assert record.status_code == 201, record.text
    made = post(qa, "/v1/experiments", {"dataset": "qa", "task": "client", "repetitions": 2})
    path = f"/v1/experiments/{made['id']}/results"
    first = post(
        qa, path, {"results": [{"item_id": "i0", "output": "one", "request_id": "req_task_1",
                                "scores": {"ok": False}}]}
    )  # fmt: skip
    assert first == {"accepted": 1, "rejected": []}
    result = post(
        qa,
        path,
        {"results": [
            {"item_id": "i0", "output": "two", "request_id": "req_task_1",
             "scores": {"ok": True}},
            {"item_id": "nope", "output": "x"},
            {"item_id": "i1", "repetition": 3},
            {"item_id": "i1", "scores": {"bad": [1]}},
            {"item_id": "i1", "status": "error", "error": "task raised"},
        ]},
    )  # fmt: skip
    assert result["accepted"] == 2
    fields = [(r["index"], r["error"]["details"].get("field")) for r in result["rejected"]]
    assert fields[:2] == [(1, "item_id"), (2, "repetition")]
    assert fields[2][0] == 3 and fields[2][1].startswith("scores.bad")
    rows = qa.get(path).json()["data"]
    assert [(r["item_id"], r["output"], r["status"]) for r in rows] == [
        ("i0", "two", "success"),
        ("i1", "", "error"),
    ]
    # The verdict is a score (source eval) on the task's record, replaced with its result.
    scores = qa.get("/v1/scores", params={"request_id": "req_task_1"}).json()["data"]
    assert [(s["name"], s["value"], s["source"]) for s in scores] == [("ok", True, "eval")]
    done = post(qa, f"/v1/experiments/{made['id']}/complete", {}, status=200)
    assert done["counts"] == {"items": 6, "runs": 12, "done": 2, "errors": 1}
    assert done["summary"]["scores"]["ok"]["mean"] == 1.0
    # Completed: no more results.
    assert_error(qa.post(path, json={"results": []}), 400, "VALIDATION_ERROR")
    # A client experiment names no prompt; a service one cannot be completed by the client.
    assert_error(
        qa.post("/v1/experiments", json={"dataset": "qa", "task": "client", "prompt": "p"}),
        400,
        "VALIDATION_ERROR",
        "prompt",
    )


def test_a_running_side_is_compared_as_it_is_now_and_finished_ones_page_consistently(
    qa: TestClient,
) -> None:
    """A comparison of two finished experiments is computed once and paged from memory
    (their results can no longer change); one with a side still running is computed anew at
    every read, so results posted meanwhile count."""
    base = client_experiment(qa, "base", BASE)
    made = post(qa, "/v1/experiments", {"dataset": "qa", "task": "client", "name": "live"})
    live = made["id"]

    def post_results(scores: dict[str, float]) -> None:
        results = [
            {"item_id": item, "output": f"live-{item}", "scores": {"quality": value}}
            for item, value in scores.items()
        ]
        post(qa, f"/v1/experiments/{live}/results", {"results": results})

    def compared(**params: Any) -> Any:
        response = qa.get(
            "/v1/experiments/compare", params={"base": base, "candidate": live, **params}
        )
        assert response.status_code == 200, response.text
        return response.json()

    def pairs(data: Any) -> int:
        quality = data["scores"]["quality"]
        return int(quality["improved"] + quality["regressed"] + quality["unchanged"])

    post_results({"i0": 0.1})
    first = compared()["data"]
    assert pairs(first) == 1 and first["unmatched"] == 4
    post_results({"i1": 0.9, "i2": 0.2})
    second = compared()["data"]
    assert pairs(second) == 3 and second["unmatched"] == 2
    post(qa, f"/v1/experiments/{live}/complete", {}, status=200)

    # Finished: pages of 2 cover the 3 paired items once each, regressions first.
    pages, cursor = [], None
    while True:
        body = compared(limit=2, **({"cursor": cursor} if cursor else {}))
        # The same figures (ClickHouse sums floats in no set order: the last digit may move).
        for name, figures in second["scores"].items():
            assert body["data"]["scores"][name] == pytest.approx(figures), name
        pages.append([item["item_id"] for item in body["data"]["items"]])
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            break
    assert pages == [["i0", "i2"], ["i1"]]


def test_intervals_stay_within_the_scale_of_the_score(qa: TestClient) -> None:
    """A t interval over three items runs far past a 0-1 scale; where the scale is known
    (booleans, a score config's min and max) the interval is cut to what the mean, or a
    delta of two means, can be. A score of unknown scale keeps its whole t interval."""
    response = qa.put("/v1/score-configs/stars", json={"data_type": "numeric", "min": 1, "max": 5})
    assert response.status_code == 200, response.text

    def experiment(name: str, correct: list[bool], stars: list[float]) -> str:
        made = post(qa, "/v1/experiments", {"dataset": "qa", "task": "client", "name": name})
        results = [
            {"item_id": f"i{n}", "scores": {"correct": c, "stars": s, "free": s}}
            for n, (c, s) in enumerate(zip(correct, stars, strict=True))
        ]
        post(qa, f"/v1/experiments/{made['id']}/results", {"results": results})
        post(qa, f"/v1/experiments/{made['id']}/complete", {}, status=200)
        experiment_id: str = made["id"]
        return experiment_id

    base = experiment("base", [True, False, True], [5, 1, 5])
    candidate = experiment("candidate", [False, True, False], [1, 5, 1])
    summary = qa.get(f"/v1/experiments/{base}").json()["data"]["summary"]["scores"]
    # correct: mean 2/3, t interval about [-0.77, 2.1]; stars: mean 11/3, about [-2.1, 9.4].
    assert summary["correct"]["mean"] == pytest.approx(2 / 3)
    assert (summary["correct"]["ci_low"], summary["correct"]["ci_high"]) == (0.0, 1.0)
    assert (summary["stars"]["ci_low"], summary["stars"]["ci_high"]) == (1.0, 5.0)
    whole = mean_interval([5.0, 1.0, 5.0])
    assert whole is not None and summary["free"]["ci_low"] == pytest.approx(whole.ci_low)
    assert whole.ci_low < 1.0 and whole.ci_high > 5.0

    compared = qa.get(
        "/v1/experiments/compare", params={"base": base, "candidate": candidate}
    ).json()["data"]["scores"]
    # Deltas -1, +1, -1 (correct) and -4, +4, -4 (stars): a delta of 0-1 means is in [-1, 1].
    assert compared["correct"]["delta"] == pytest.approx(-1 / 3)
    assert (compared["correct"]["ci_low"], compared["correct"]["ci_high"]) == (-1.0, 1.0)
    assert (compared["stars"]["ci_low"], compared["stars"]["ci_high"]) == (-4.0, 4.0)
    free = mean_interval([-4.0, 4.0, -4.0])
    assert free is not None and compared["free"]["ci_low"] == pytest.approx(free.ci_low)
    assert free.ci_low < -4.0


def test_a_summary_s_cost_is_the_same_whatever_order_its_results_are_summed_in(
    qa: TestClient,
) -> None:
    # 0.1 + 0.2 + 0.3 is 0.6000000000000001 in this order and 0.6 in another: a merge or a
    # restart may change the order the store sums them in, never the summary a user reads.
    made = post(qa, "/v1/experiments", {"dataset": "qa", "task": "client"})
    for item, cost in (("i0", 0.1), ("i1", 0.2), ("i2", 0.3)):
        post(
            qa,
            f"/v1/experiments/{made['id']}/results",
            {"results": [{"item_id": item, "output": "x", "estimated_cost_usd": cost}]},
        )

    summary = qa.get(f"/v1/experiments/{made['id']}").json()["data"]["summary"]

    assert summary["estimated_cost_usd"] == 0.6
