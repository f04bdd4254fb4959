"""Scores the collector builds itself (the evaluation worker's, issue 50 "Speed and scale"):
typed rows written without a body to parse, and without reading every id's live version
first. Written again under the same ids (a batch decided again after a crash, a backfill),
they replace the old ones as any score write does: one live score per id, and the sums that
score filters and analytics read stay exact. A row a client's batch would refuse is refused
alike. Real chDB; the app over ASGI.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.services.scores import ScoreService
from promptrail.collector.store.score_rows import ScoreRow

Sums = dict[tuple[str, int, str, str], tuple[float, int, int]]
TRACE = "0af7651916cd43dd8448eb211c80319c"


def _service(api: TestClient) -> ScoreService:
    found: ScoreService = api.app.state.services.scores
    return found


def _client_and_database(api: TestClient) -> tuple[Any, str]:
    store = api.app.state.services.store
    return store.client, str(store.database)


def _row(score_id: str, value: Any, **target: str) -> ScoreRow:
    return ScoreRow(
        project="default",
        id=score_id,
        request_id=target.get("request_id"),
        trace_id=target.get("trace_id"),
        session_id=target.get("session_id"),
        name=target.get("name", "valid"),
        data_type="boolean" if isinstance(value, bool) else "numeric",
        value=value,
        comment=None,
        correction=None,
        source="eval",
        metadata={"rule_id": "rule_1", "evaluator": "valid", "evaluator_version": 1},
        created_at=datetime(2026, 11, 29, 8, 0, tzinfo=UTC),
    )


def _sums(api: TestClient) -> Sums:
    """What ``score_sums`` says per (name, on_trace, target, value), zero keys left out."""
    client, database = _client_and_database(api)
    rows = client.query(
        "SELECT name, on_trace, target, value_text, sum(total), sum(numbers), sum(scores) "
        f"FROM `{database}`.score_sums WHERE project = 'default' "
        "GROUP BY name, on_trace, target, value_text"
    ).result_rows
    return {
        (r[0], int(r[1]), r[2], r[3]): (round(float(r[4]), 9), int(r[5]), int(r[6]))
        for r in rows
        if (int(r[5]), int(r[6])) != (0, 0) or abs(float(r[4])) > 1e-9
    }


def _reference(api: TestClient) -> Sums:
    """The same sums from each id's newest version in ``scores``, when live."""
    client, database = _client_and_database(api)
    rows = client.query(
        "SELECT s.3, multiIf(s.7 != '', 2, s.2 != '', 1, 0), "
        "multiIf(s.7 != '', s.7, s.2 != '', s.2, s.1), s.4, s.5 FROM (SELECT id, "
        "argMax(tuple(request_id, trace_id, name, value_text, value_number, is_deleted, "
        f"session_id), written_at) AS s FROM `{database}`.scores WHERE project = 'default' "
        "GROUP BY id) WHERE s.6 = 0"
    ).result_rows
    sums: dict[tuple[str, int, str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0])
    for name, on_trace, target, text, number in rows:
        entry = sums[(name, int(on_trace), target, text)]
        entry[0] += number or 0.0
        entry[1] += number is not None
        entry[2] += 1
    return {k: (round(v[0], 9), int(v[1]), int(v[2])) for k, v in sums.items()}


def _listed(api: TestClient, **target: str) -> list[tuple[str, Any]]:
    response = api.get("/v1/scores", params=target)
    assert response.status_code == 200, response.text
    return [(s["id"], s["value"]) for s in response.json()["data"]]


def test_own_scores_written_again_replace_the_old_ones_and_the_sums_stay_exact(
    api: TestClient,
) -> None:
    service = _service(api)
    first = [
        _row("eval_r1", True, request_id="req_own-1"),
        _row("eval_r2", 0.25, request_id="req_own-2", name="grade"),
        _row("eval_t1", False, trace_id=TRACE),
        _row("eval_s1", 0.5, session_id="chat-1", name="grade"),
    ]
    assert service.batch_own("default", first) == (4, [])
    assert _listed(api, request_id="req_own-1") == [("eval_r1", True)]
    assert _sums(api) == _reference(api)
    assert len(_sums(api)) == 4

    # A user deletes one; then the batch is decided again (a crash before its decisions were
    # stored, or a backfill), with other values, beside a score never written before.
    assert api.delete("/v1/scores/eval_r2").status_code == 200
    again = [
        replace(first[0], value=False),
        replace(first[1], value=0.75),
        replace(first[2], value=True),
        replace(first[3], value=1),
        _row("eval_r3", True, request_id="req_own-3"),
    ]
    assert service.batch_own("default", again) == (5, [])
    assert _listed(api, request_id="req_own-1") == [("eval_r1", False)]
    assert _listed(api, request_id="req_own-2") == [("eval_r2", 0.75)]
    assert _listed(api, trace_id=TRACE) == [("eval_t1", True)]
    assert _listed(api, session_id="chat-1") == [("eval_s1", 1)]
    assert _listed(api, request_id="req_own-3") == [("eval_r3", True)]
    # One live version each, exactly: no old version left counted.
    assert _sums(api) == _reference(api)
    assert sum(scores for _, _, scores in _sums(api).values()) == 5


def test_an_own_row_a_client_s_batch_would_refuse_is_refused_alike(api: TestClient) -> None:
    config = {"data_type": "numeric", "min": 0, "max": 1}
    assert api.put("/v1/score-configs/grade", json=config).status_code == 200
    rows = [
        _row("eval_ok", 0.5, request_id="req_ok", name="grade"),
        _row("eval_high", 3, request_id="req_high", name="grade"),
        _row("eval_long", True, session_id="s" * 1001),
        _row("eval_bad_trace", True, trace_id="not-a-trace"),
        _row("eval_nan", float("nan"), request_id="req_nan", name="nan"),
    ]
    stored, rejected = _service(api).batch_own("default", rows)
    bodies = [
        {"id": "c_ok", "request_id": "req_ok", "name": "grade", "value": 0.5},
        {"id": "c_high", "request_id": "req_high", "name": "grade", "value": 3},
        {"id": "c_long", "session_id": "s" * 1001, "name": "valid", "value": True},
        {"id": "c_bad_trace", "trace_id": "not-a-trace", "name": "valid", "value": True},
    ]
    answer = api.post("/v1/scores/batch", json={"scores": bodies})
    assert answer.status_code == 201, answer.text
    by_client = {
        e["index"]: e["error"]["details"]["field"] for e in answer.json()["data"]["rejected"]
    }

    assert stored == 1
    fields = {index: error["details"]["field"] for index, error in rejected}
    assert by_client == {1: "value", 2: "session_id", 3: "trace_id"}
    assert fields == {**by_client, 4: "value"}  # NaN: no JSON number
    assert all(error["code"] == "VALIDATION_ERROR" for _, error in rejected)
    assert sorted(_listed(api, request_id="req_ok")) == [("c_ok", 0.5), ("eval_ok", 0.5)]
    assert _listed(api, request_id="req_high") == []
