"""The evaluation worker on sessions (issue 50 point 2): a session (the records sharing a
``metadata.session_id``) one of whose records passes a rule's filter is `waiting` while its
records keep arriving, and decided once, after `idle_seconds` without a new one. Its input is
its first model call's input, its output its last model call's output, the path
``transcript`` gives its model calls' inputs and outputs oldest first, and the score is on
the session, shown with the decision on the session's page. A collector (ASGI) on a real
chDB store."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.evaluation.steps import (
    create_rule,
    decisions_by_target,
    log_batch,
    put_evaluator,
    until_decided,
)

SESSION = "chat-7f3a"
QUIET = "chat-other"


def _record(rid: str, session: str, at: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "created_at": f"2026-11-01T10:00:{at:02d}Z",
        "status": "success",
        "model": "gpt-4o-mini",
        "metadata": {"session_id": session, **fields.pop("metadata", {})},
        **fields,
    }


def test_a_session_waits_until_quiet_then_is_judged_once_first_input_last_output(
    api: TestClient,
) -> None:
    put_evaluator(api, "same", {"type": "exact_match"})
    rule = create_rule(
        api,
        evaluator="same",
        target="session",
        idle_seconds=2,
        filter={"metadata": {"app": "support"}},
        mapping={"input": "input", "output": "output.content", "expected": "metadata.want"},
    )
    log_batch(api, [
        _record("req_s1", SESSION, 1, input="first question", output={"content": "hello"},
                metadata={"app": "support", "want": "final answer"}),
        # A session none of whose records passes the filter gets no decision.
        _record("req_q1", QUIET, 2, output={"content": "x"}, metadata={"app": "sales"}),
    ])  # fmt: skip
    waiting = until_decided(api, rule["id"], SESSION, "waiting")[SESSION]
    assert waiting["target_type"] == "session" and "idle time of 2 s" in waiting["reason"]
    # The conversation goes on: its last model call's output is the one judged (a tool span
    # after it is no model call), against the expected output read from its first call.
    log_batch(api, [
        _record("req_s2", SESSION, 3, input="second question", output={"content": "final answer"}),
        _record("req_s3", SESSION, 4, kind="tool", output={"content": "tool result"}),
    ])  # fmt: skip
    found = until_decided(api, rule["id"], SESSION, "scored")
    assert set(found) == {SESSION}
    (score,) = api.get("/v1/scores", params={"session_id": SESSION}).json()["data"]
    assert score["id"] == found[SESSION]["score_id"] and score["value"] is True
    assert (score["source"], score["request_id"], score["trace_id"]) == ("eval", None, None)
    assert score["metadata"]["rule_id"] == rule["id"]
    page = api.get(f"/v1/sessions/{SESSION}").json()["data"]
    (evaluation,) = page["evaluations"]
    assert (evaluation["rule_id"], evaluation["decision"]) == (rule["id"], "scored")
    assert evaluation["score_id"] == score["id"] and evaluation["reason"]
    assert page["scores"] == {"same": 1.0}
    assert api.get(f"/v1/sessions/{QUIET}").json()["data"]["evaluations"] == []
    time.sleep(1.5)  # decided once: nothing more comes of the records already read
    assert decisions_by_target(api, rule["id"]) == found


def test_the_transcript_is_the_session_s_model_calls_oldest_first(api: TestClient) -> None:
    turns = r'\{"input": "q1", "output": "a1"\}, \{"input": "q2", "output": "a2"\}'
    put_evaluator(api, "turns", {"type": "regex", "pattern": rf"^\[{turns}\]$"})
    rule = create_rule(
        api,
        evaluator="turns",
        target="session",
        idle_seconds=0,
        mapping={"input": "input", "output": "transcript"},
    )
    none = create_rule(api, evaluator="turns", target="session", sampling=0)
    log_batch(api, [
        _record("req_t2", "chat-t", 2, input="q2", output={"content": "a2"}),
        _record("req_t1", "chat-t", 1, input="q1", output={"content": "a1"}),
        _record("req_tc", "chat-t", 3, kind="chain", input="q3", output={"content": "a3"}),
    ])  # fmt: skip
    deadline = time.monotonic() + 60
    while (decision := decisions_by_target(api, rule["id"]).get("chat-t")) is None or decision[
        "decision"
    ] == "waiting":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert decision["decision"] == "scored", decision
    (score,) = api.get("/v1/scores", params={"session_id": "chat-t"}).json()["data"]
    assert score["value"] is True, decision
    # Left out of a sample on arrival: final at once, naming the version the rule runs.
    (left_out,) = decisions_by_target(api, none["id"]).values()
    assert (left_out["target_id"], left_out["decision"]) == ("chat-t", "not_sampled")
    assert left_out["evaluator_version"] == 1 and left_out["score_id"] is None
