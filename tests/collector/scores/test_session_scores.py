"""Scores on sessions (docs/api-notes.md, "Scores and feedback"): a score targets a record, a
trace or a session, exactly one; a session's scores are read back by ``session_id=``, count
in the session's list item and page, and never for a record, a trace or a session of the same
id text; deleting a session's records leaves its scores, as a trace's stay.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from tests.collector.scores.steps import assert_error, created, listed, log


def _session_records(api: TestClient, tag: str, session: str) -> tuple[str, str]:
    """Two records of the session ``session`` tagged ``tag``, the second in a trace."""
    trace = uuid.uuid4().hex
    first = log(api, tag, 1, metadata={"tag": tag, "session_id": session})
    second = log(api, tag, 2, trace, metadata={"tag": tag, "session_id": session})
    return first, second


def _scores(api: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/v1/scores", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]
    return items


def test_a_score_on_a_session_is_stored_listed_and_counted_on_the_session(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    session = f"conv-{tag}"
    _session_records(scores_api, tag, session)
    score = created(
        scores_api,
        session_id=session,
        name="resolved",
        value=True,
        created_at="2026-03-02T10:00:00Z",
    )
    assert score["session_id"] == session
    assert score["request_id"] is None and score["trace_id"] is None
    assert score["data_type"] == "boolean"
    assert scores_api.get(f"/v1/scores/{score['id']}").json()["data"]["session_id"] == session

    assert [s["id"] for s in _scores(scores_api, session_id=session)] == [score["id"]]
    detail = scores_api.get(f"/v1/sessions/{session}").json()["data"]
    assert detail["scores"] == {"resolved": 1.0}
    # The session's records do not take it on as their own.
    assert all(item["scores"] == {} for item in detail["items"])
    assert all(item["scores"] == {} for item in listed(scores_api, tag))
    page = scores_api.get(
        "/v1/sessions", params={"start_date": "2026-03-01", "end_date": "2026-03-01"}
    ).json()["data"]
    (item,) = [s for s in page if s["session_id"] == session]
    assert item["scores"] == {"resolved": 1.0}

    # A session's score matches no record of the log by its name.
    assert listed(scores_api, tag, **{"score.resolved": "true"}) == []
    assert len(listed(scores_api, tag, unscored="resolved")) == 2

    # Posted again under its id: replaced, on the same session.
    again = created(scores_api, id=score["id"], session_id=session, name="resolved", value=False)
    assert again["value"] is False
    detail = scores_api.get(f"/v1/sessions/{session}").json()["data"]
    assert detail["scores"] == {"resolved": 0.0}
    assert scores_api.delete(f"/v1/scores/{score['id']}").status_code == 200
    assert _scores(scores_api, session_id=session) == []
    assert scores_api.get(f"/v1/sessions/{session}").json()["data"]["scores"] == {}


def test_one_target_exactly_and_the_session_s_length(scores_api: TestClient) -> None:
    both = scores_api.post(
        "/v1/scores", json={"request_id": "req_a", "session_id": "s", "name": "n", "value": 1}
    )
    assert_error(both, 400, "VALIDATION_ERROR", "session_id")
    assert "session_id" in both.json()["error"]["message"]
    three = scores_api.post(
        "/v1/scores",
        json={"trace_id": uuid.uuid4().hex, "session_id": "s", "name": "n", "value": 1},
    )
    assert_error(three, 400, "VALIDATION_ERROR", "session_id")
    none = scores_api.post("/v1/scores", json={"name": "n", "value": 1})
    assert_error(none, 400, "VALIDATION_ERROR", "request_id")
    empty = scores_api.post("/v1/scores", json={"session_id": "", "name": "n", "value": 1})
    assert_error(empty, 400, "VALIDATION_ERROR", "session_id")
    too_long = scores_api.post(
        "/v1/scores", json={"session_id": "s" * 1001, "name": "n", "value": 1}
    )
    assert_error(too_long, 400, "VALIDATION_ERROR", "session_id")


def test_a_batch_takes_session_scores_and_reports_a_bad_one_by_index(
    scores_api: TestClient,
) -> None:
    session = f"conv-{uuid.uuid4().hex[:8]}"
    response = scores_api.post(
        "/v1/scores/batch",
        json={
            "scores": [
                {"session_id": session, "name": "csat", "value": 4},
                {"session_id": session, "request_id": "req_x", "name": "csat", "value": 5},
                {"session_id": session, "name": "csat", "value": 2},
            ]
        },
    )
    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["accepted"] == 2
    assert [r["index"] for r in data["rejected"]] == [1]
    assert data["rejected"][0]["error"]["code"] == "VALIDATION_ERROR"
    assert sorted(s["value"] for s in _scores(scores_api, session_id=session)) == [2, 4]


def test_a_session_id_equal_to_a_trace_or_a_record_id_keeps_each_score_its_own(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    trace = uuid.uuid4().hex
    record = log(scores_api, tag, 3, trace, metadata={"tag": tag, "session_id": trace})
    on_trace = created(scores_api, trace_id=trace, name="q", value=0.2)
    on_record = created(scores_api, request_id=record, name="q", value=0.4)
    on_session = created(scores_api, session_id=trace, name="q", value=1.0)
    on_record_text = created(scores_api, session_id=record, name="q", value=0.0)

    assert [s["id"] for s in _scores(scores_api, trace_id=trace)] == [on_trace["id"]]
    assert [s["id"] for s in _scores(scores_api, request_id=record)] == [on_record["id"]]
    assert [s["id"] for s in _scores(scores_api, session_id=trace)] == [on_session["id"]]
    assert [s["id"] for s in _scores(scores_api, session_id=record)] == [on_record_text["id"]]
    # The record's detail: its own score and its trace's, not the sessions'.
    detail = scores_api.get(f"/v1/requests/{record}").json()["data"]
    assert sorted(s["id"] for s in detail["scores"]) == sorted([on_trace["id"], on_record["id"]])
    (item,) = listed(scores_api, tag)
    assert item["scores"] == {"q": (0.2 + 0.4) / 2}
    trace_page = scores_api.get(f"/v1/traces/{trace}").json()["data"]
    assert trace_page["scores"] == {"q": (0.2 + 0.4) / 2}
    # The session's: its own, its record's and that record's trace's.
    session = scores_api.get(f"/v1/sessions/{trace}").json()["data"]
    assert session["scores"] == {"q": (0.2 + 0.4 + 1.0) / 3}
    exported = scores_api.get(
        "/v1/requests/analytics",
        params={
            "metric": "score",
            "score_name": "q",
            "filters": f'{{"metadata": {{"tag": "{tag}"}}}}',
            "start_date": "2026-03-01",
            "end_date": "2026-03-01",
        },
    ).json()["data"]
    assert exported["score_count"] == 2  # the record's and its trace's


def test_deleting_a_session_s_records_leaves_its_scores_as_a_trace_s_stay(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    session = f"conv-{tag}"
    first, _ = _session_records(scores_api, tag, session)
    kept = created(scores_api, session_id=session, name="csat", value=3)
    gone = created(scores_api, request_id=first, name="csat", value=1)
    deleted = scores_api.request("DELETE", "/v1/requests", json={"metadata": {"tag": tag}})
    assert deleted.status_code == 200, deleted.text
    assert scores_api.get(f"/v1/scores/{gone['id']}").status_code == 404
    assert [s["id"] for s in _scores(scores_api, session_id=session)] == [kept["id"]]
    assert scores_api.get(f"/v1/sessions/{session}").status_code == 404  # no record left
