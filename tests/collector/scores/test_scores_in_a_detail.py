"""A record's detail reads its own scores beside the record, at the same time, on a handle of
their own (issue 31's detail target), and still shows exactly its own scores and its trace's.

The queries are counted on the collector's real ClickHouse client (a wrapper that passes
every call through), at the service the route calls: the record's read is the only one on
it for a record outside a trace (two in a row before), and a trace's scores a second.
"""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from tests.collector.scores.steps import counted_queries, created, log

AT = "2026-03-02T10:00:%02dZ"  # scores' times, so that newest first is a set order


@pytest.mark.cost
def test_a_detail_reads_its_own_scores_beside_the_record_and_its_trace_s_after(
    scores_api: TestClient,
) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    record, alone = log(scores_api, tag, 1, trace), log(scores_api, tag, 4)
    other = log(scores_api, tag, 2, trace)
    own = created(scores_api, request_id=record, name="helpful", value=0.5, created_at=AT % 1)
    traced = created(scores_api, trace_id=trace, name="tone", value="kind", created_at=AT % 2)
    created(scores_api, request_id=other, name="helpful", value=1)  # not this record's
    mine = created(scores_api, request_id=alone, name="helpful", value=0.1)
    services = scores_api.app.state.services
    with counted_queries(scores_api) as seen:
        row, scores = services.requests.detail("default", alone)
    assert len(seen) == 1, seen  # the record; its scores on the side handle
    assert (row.id, [s.id for s in scores]) == (alone, [mine["id"]])
    with counted_queries(scores_api) as seen:
        row, scores = services.requests.detail("default", record)
    assert len(seen) == 2, seen  # the record, then its trace's scores
    assert row.id == record
    assert [s.id for s in scores] == [traced["id"], own["id"]]
    detail = scores_api.get(f"/v1/requests/{record}").json()["data"]
    assert [s["id"] for s in detail["scores"]] == [traced["id"], own["id"]]


def test_a_detail_without_scores_and_a_missing_record(scores_api: TestClient) -> None:
    record = log(scores_api, uuid.uuid4().hex[:8], 3)
    row, scores = scores_api.app.state.services.requests.detail("default", record)
    assert (row.id, scores) == (record, [])
    missing = scores_api.get("/v1/requests/req_never_logged_b37")
    assert missing.status_code == 404, missing.text
    assert missing.json()["error"]["code"] == "REQUEST_NOT_FOUND"


def test_an_id_logged_twice_shows_the_newest_copy_s_trace_scores_only(
    scores_api: TestClient,
) -> None:
    tag, old_trace, new_trace = uuid.uuid4().hex[:8], uuid.uuid4().hex, uuid.uuid4().hex
    record = f"req_{tag}_twice"
    for second, trace in ((1, old_trace), (2, new_trace)):
        body = {
            "id": record,
            "created_at": f"2026-03-01T11:00:{second:02d}Z",
            "model": "gpt-4o-mini",
            "output": {"content": "answer"},
            "trace_id": trace,
            "span_id": f"{second:016x}",
        }
        assert scores_api.post("/v1/requests", json=body).status_code == 201
    created(scores_api, trace_id=old_trace, name="tone", value="old")
    newest = created(scores_api, trace_id=new_trace, name="tone", value="new", created_at=AT % 1)
    own = created(scores_api, request_id=record, name="helpful", value=1, created_at=AT % 2)
    row, scores = scores_api.app.state.services.requests.detail("default", record)
    assert row.trace_id == new_trace
    assert [s.id for s in scores] == [own["id"], newest["id"]]
