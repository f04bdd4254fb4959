"""Backfills of trace and session rules (issue 50 point 4): the traces or sessions with a
record created in the window, each read whole and decided as the live path decides it (the
same sample, the same score ids: a score evaluated again is replaced), as a job whose
progress counts traces or sessions. A collector (ASGI) on a real chDB store."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.services.evaluation import in_sample
from tests.collector.evaluation.steps import (
    create_rule,
    decisions_by_target,
    log_batch,
    put_evaluator,
)

NOW = datetime.now(UTC).replace(microsecond=0)


def _call(rid: str, at: datetime, content: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "created_at": at.isoformat(),
        "model": "gpt-4o-mini",
        "status": "success",
        "output": {"content": content},
        **fields,
    }


def _backfilled(api: TestClient, rule_id: str, since: datetime) -> dict[str, Any]:
    window = {"from": since.isoformat(), "to": (NOW + timedelta(hours=1)).isoformat()}
    started = api.post(f"/v1/evaluation-rules/{rule_id}/backfill", json=window)
    assert started.status_code == 202, started.text
    deadline = time.monotonic() + 60
    while True:
        shown = api.get(f"/v1/evaluation-rules/{rule_id}").json()["data"]["backfill"]
        if shown["status"] != "running":
            return dict(shown)
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)


def _final(api: TestClient, rule_id: str, n: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 60
    while True:
        found = decisions_by_target(api, rule_id)
        if len(found) == n and all(d["decision"] != "waiting" for d in found.values()):
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def test_a_trace_backfill_decides_what_the_live_path_decided(api: TestClient) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    live = create_rule(api, name="live", evaluator="valid", target="trace", idle_seconds=0,
                       sampling=0.5)  # fmt: skip
    traces = [uuid.uuid4().hex for _ in range(8)]
    log_batch(api, [
        _call(f"req_{t[:8]}_{n}", NOW - timedelta(minutes=5), content, trace_id=t,
              span_id=f"{n + 1:016x}")
        for t in traces
        for n, content in enumerate(("no json", "{}"))
    ])  # fmt: skip
    before = _final(api, live["id"], len(traces))
    assert set(before) == set(traces)
    done = _backfilled(api, live["id"], NOW - timedelta(hours=1))
    assert done == {"status": "completed", "done": len(traces), "total": len(traces)}
    after = decisions_by_target(api, live["id"])
    assert {k: (d["decision"], d["score_id"]) for k, d in after.items()} == {
        k: (d["decision"], d["score_id"]) for k, d in before.items()
    }
    for trace, decision in after.items():
        sampled = in_sample(live["id"], trace, 0.5)
        assert decision["decision"] == ("scored" if sampled else "not_sampled")
        if sampled:  # scored again: one score on the trace, under the same id, its last call's
            (score,) = api.get("/v1/scores", params={"trace_id": trace}).json()["data"]
            assert (score["id"], score["value"]) == (decision["score_id"], True)


def test_a_session_backfill_takes_the_sessions_with_a_record_in_the_window(
    api: TestClient,
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    recent = [f"bf-{n}" for n in range(3)]
    log_batch(api, [
        *(_call(f"req_{s}_{n}", NOW - timedelta(minutes=10 - n), content,
                metadata={"session_id": s})
          for s in recent
          for n, content in enumerate(("no json", "[1]"))),
        # An older session: none of its records in the window.
        _call("req_old_0", NOW - timedelta(days=3), "{}", metadata={"session_id": "bf-old"}),
        # A session whose first record is older than the window, its last one inside: taken,
        # whole (its last model call's output is the one judged).
        _call("req_span_0", NOW - timedelta(days=3), "{}", metadata={"session_id": "bf-span"}),
        _call("req_span_1", NOW - timedelta(minutes=1), "not json",
              metadata={"session_id": "bf-span"}),
    ])  # fmt: skip
    rule = create_rule(api, name="later", evaluator="valid", target="session", idle_seconds=0)
    time.sleep(1.0)  # the live path leaves records logged before the rule alone
    assert decisions_by_target(api, rule["id"]) == {}
    done = _backfilled(api, rule["id"], NOW - timedelta(hours=1))
    assert done == {"status": "completed", "done": 4, "total": 4}
    decided = decisions_by_target(api, rule["id"])
    assert set(decided) == {*recent, "bf-span"}
    assert {d["target_type"] for d in decided.values()} == {"session"}
    values = {
        s: api.get("/v1/scores", params={"session_id": s}).json()["data"][0]["value"]
        for s in decided
    }
    assert values == {**dict.fromkeys(recent, True), "bf-span": False}
    page = api.get("/v1/sessions/bf-0").json()["data"]
    assert [e["decision"] for e in page["evaluations"]] == ["scored"]
    # Run again: decided alike, each score replaced under its id.
    assert _backfilled(api, rule["id"], NOW - timedelta(hours=1))["status"] == "completed"
    again = decisions_by_target(api, rule["id"])
    assert {k: d["score_id"] for k, d in again.items()} == {
        k: d["score_id"] for k, d in decided.items()
    }
    assert len(api.get("/v1/scores", params={"session_id": "bf-0"}).json()["data"]) == 1
