"""The evaluation worker on traces (issue 50 point 2): a trace matching a rule (any of its
records passes the filter) is `waiting` while records keep arriving, and decided once, after
`idle_seconds` without a new record: its input is its root's, its output its last model
call's, and the score is on the trace. A collector (ASGI) on a real chDB store."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from tests.collector.evaluation.steps import (
    create_rule,
    decisions_by_target,
    log_batch,
    put_evaluator,
    until_decided,
)

TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER = "1bf7651916cd43dd8448eb211c80319d"
# The worker looks for new records and idle traces this often (at the product's 0.5 s each
# wait below waited for a pass up to half a second later).
POLL = 0.1


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The collector's settings with the worker looking every ``POLL`` seconds."""
    return settings.model_copy(update={"evaluation_poll_seconds": POLL})


def _span(rid: str, trace: str, span: str, parent: str, **fields: Any) -> dict[str, Any]:
    record = {"id": rid, "trace_id": trace, "span_id": span, "status": "success", **fields}
    if parent:
        record["parent_span_id"] = parent
    return record


def test_a_trace_waits_until_quiet_then_is_judged_once_on_its_last_model_call(
    api: TestClient,
) -> None:
    put_evaluator(api, "valid", {"type": "json_valid"})
    rule = create_rule(
        api, evaluator="valid", target="trace", idle_seconds=2, filter={"model": "gpt-4o-mini"}
    )
    log_batch(api, [
        _span("req_root", TRACE, "a1a1a1a1a1a1a1a1", "", kind="chain", span_name="agent",
              output={"content": "not json"}),
        _span("req_call1", TRACE, "b1b1b1b1b1b1b1b1", "a1a1a1a1a1a1a1a1", kind="llm",
              model="gpt-4o-mini", output={"content": "still not json"}),
        # A trace none of whose records passes the filter gets no decision.
        _span("req_lone", OTHER, "c1c1c1c1c1c1c1c1", "", kind="llm", model="claude-3-5-haiku",
              output={"content": "{}"}),
    ])  # fmt: skip
    waiting = until_decided(api, rule["id"], TRACE, "waiting")[TRACE]
    assert waiting["target_type"] == "trace" and "idle time of 2 s" in waiting["reason"]
    # A later model call of the same trace: its output is the one judged.
    log_batch(api, [_span("req_call2", TRACE, "d1d1d1d1d1d1d1d1", "a1a1a1a1a1a1a1a1", kind="llm",
                     model="gpt-4o-mini", output={"content": '{"answer": 42}'})])  # fmt: skip
    found = until_decided(api, rule["id"], TRACE, "scored")
    assert set(found) == {TRACE}
    (score,) = api.get("/v1/scores", params={"trace_id": TRACE}).json()["data"]
    assert score["id"] == found[TRACE]["score_id"] and score["value"] is True
    assert score["source"] == "eval" and score["request_id"] is None
    (evaluation,) = api.get(f"/v1/traces/{TRACE}").json()["data"]["evaluations"]
    assert (evaluation["rule_id"], evaluation["decision"]) == (rule["id"], "scored")
    assert evaluation["score_id"] == score["id"]
    time.sleep(5 * POLL)  # decided once: nothing more comes of the records already read
    assert decisions_by_target(api, rule["id"]) == found
