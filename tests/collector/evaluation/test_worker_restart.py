"""The evaluation worker survives a kill -9 (issue 50 point 4): real ``promptrail serve``
processes on one data directory. Every record acknowledged before the kill gets its one
decision after the restart, and none is decided twice (each target has exactly one decision
row ever written, read from the store once the collector stopped)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.collector.evaluation.steps import decision_rows, killed
from tests.collector.processes import collector

RECORDS = 200
# After the restart the worker looks for new records this often (at the product's 0.5 s the
# wait below waited for a pass up to half a second later); before the kill, as a user runs it.
QUICK_WORKER = {"PROMPTRAIL_EVALUATION_POLL_SECONDS": "0.1"}


def test_records_acknowledged_before_a_kill_are_each_decided_once_after_the_restart(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    ids = [f"req_k{n:03d}" for n in range(RECORDS)]
    with collector(tmp_path, log) as api:
        assert api.put("/v1/evaluators/valid", json={"type": "json_valid"}).status_code == 200
        made = api.post(
            "/v1/evaluation-rules", json={"name": "r", "evaluator": "valid", "target": "record"}
        )
        assert made.status_code == 201, made.text
        rule_id = made.json()["data"]["id"]
        for start in range(0, RECORDS, 50):
            batch: list[dict[str, Any]] = [
                {"id": i, "model": "gpt-4o-mini", "status": "success",
                 "output": {"content": "{}"}}
                for i in ids[start : start + 50]
            ]  # fmt: skip
            answer = api.post("/v1/requests/batch", json={"records": batch})
            assert answer.status_code == 201, answer.text  # acknowledged: stored
        killed(api, tmp_path)
    with collector(tmp_path, log, QUICK_WORKER) as api:
        deadline = time.monotonic() + 120
        while True:
            counts = api.get(f"/v1/evaluation-rules/{rule_id}").json()["data"]["counts"]
            if counts["scored"] == RECORDS:
                break
            assert time.monotonic() < deadline, counts
            time.sleep(0.05)
        # Read once all are counted (a page read before the count may predate the batch).
        page = api.get(f"/v1/evaluation-rules/{rule_id}/decisions", params={"limit": 100}).json()
        assert {d["decision"] for d in page["data"]} == {"scored"}
        detail = api.get(f"/v1/requests/{ids[0]}").json()["data"]
        assert [e["decision"] for e in detail["evaluations"]] == ["scored"]
    rows = decision_rows(tmp_path)
    assert sorted(rows) == ids
    assert set(rows.values()) == {1}, {k: v for k, v in rows.items() if v != 1}
