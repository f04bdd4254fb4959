"""Backfills (issue 50 point 4): a rule run on the records of a past window is a job with
progress on the rule's GET, and decides exactly as the live path did (same sample, same
score ids: a score evaluated again is replaced). A collector (ASGI) on a real chDB store."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.services.evaluation import in_sample
from tests.collector.contract import assert_error
from tests.collector.evaluation.steps import create_rule, decisions_by_target, put_evaluator

IDS = [f"req_bf{n:02d}" for n in range(20)]


def _log(api: TestClient) -> None:
    records = [
        {"id": rid, "model": "gpt-4o-mini", "status": "success", "output": {"content": "{}"}}
        for rid in IDS
    ]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text


def _settled(api: TestClient, rule_id: str) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        found = decisions_by_target(api, rule_id)
        if len(found) == len(IDS):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def _backfill(api: TestClient, rule_id: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    window = {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(hours=1)).isoformat(),
    }
    started = api.post(f"/v1/evaluation-rules/{rule_id}/backfill", json=window)
    assert started.status_code == 202, started.text
    job: dict[str, Any] = started.json()["data"]
    assert (job["status"], job["done"]) == ("running", 0) and job["total"] >= len(IDS)
    deadline = time.monotonic() + 60
    while True:
        shown = api.get(f"/v1/evaluation-rules/{rule_id}").json()["data"]["backfill"]
        if shown["status"] != "running":
            return dict(shown)
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)


def test_a_backfill_decides_what_the_live_path_decided_and_replaces_its_scores(
    api: TestClient,
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    live = create_rule(api, name="live", evaluator="valid", sampling=0.5)
    _log(api)
    before = _settled(api, live["id"])
    # A rule made after the records were logged: the live path leaves them alone.
    later = create_rule(api, name="later", evaluator="valid", sampling=0.5)
    assert api.get(f"/v1/evaluation-rules/{later['id']}").json()["data"]["backfill"] is None
    done = _backfill(api, live["id"])
    assert done["status"] == "completed" and done["done"] == done["total"] >= len(IDS)
    after = decisions_by_target(api, live["id"])
    assert {k: (d["decision"], d["score_id"]) for k, d in after.items()} == {
        k: (d["decision"], d["score_id"]) for k, d in before.items()
    }
    # Scored again: still one score per record, under the same id.
    scored = [k for k, d in after.items() if d["decision"] == "scored"]
    for rid in scored[:3]:
        (score,) = api.get("/v1/scores", params={"request_id": rid}).json()["data"]
        assert score["id"] == after[rid]["score_id"]
    assert decisions_by_target(api, later["id"]) == {}
    assert _backfill(api, later["id"])["status"] == "completed"
    decided = decisions_by_target(api, later["id"])
    assert set(decided) == set(IDS)
    for rid, decision in decided.items():
        sampled = in_sample(later["id"], rid, 0.5)
        assert decision["decision"] == ("scored" if sampled else "not_sampled")


def test_a_backfill_s_bad_window_or_unknown_rule_is_a_clear_error(api: TestClient) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    rule = create_rule(api, evaluator="valid")
    now = datetime.now(UTC).isoformat()
    response = api.post(
        f"/v1/evaluation-rules/{rule['id']}/backfill", json={"from": now, "to": now}
    )
    assert_error(response, 400, "VALIDATION_ERROR", "to")
    response = api.post("/v1/evaluation-rules/rule_nope/backfill", json={"from": now, "to": now})
    assert_error(response, 404, "RULE_NOT_FOUND")
    response = api.post(f"/v1/evaluation-rules/{rule['id']}/backfill", json={"from": "soon"})
    assert response.status_code == 400
