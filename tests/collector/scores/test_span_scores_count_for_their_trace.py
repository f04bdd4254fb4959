"""A score on a span record counts for its trace wherever the log reads scores (issue 47
point 2; docs/api-notes.md, "Scores and feedback").

The README's feedback pattern once put thumbs on an ``@observe`` function's record
(``req_<trace><span>``, kind ``span``), which the request log hides: the thumb was missing from
the model call's list item, the score filters, exports and score analytics, where it formed a
group named "0" (the span's version) when grouped by version. Each test logs one observed
function's trace under a metadata tag of its own: the function's span record and the model
call inside it, on prompt version 3.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.store.score_sql import span_ids
from tests.collector.request_log.export_steps import finish, start
from tests.collector.scores.steps import (
    counted_queries,
    created,
    listed,
    log_trace,
    observed_call,
)


def thumbs_down(api: TestClient, record_id: str) -> dict[str, Any]:
    return created(api, request_id=record_id, name="thumbs", value=False, source="sdk")


def test_a_thumb_on_the_span_shows_on_the_model_call_s_list_item_and_detail(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    _, span, call = observed_call(scores_api, tag)
    thumb = thumbs_down(scores_api, span)
    items = listed(scores_api, tag)
    assert [item["id"] for item in items] == [call]
    assert items[0]["scores"] == {"thumbs": 0}
    detail = scores_api.get(f"/v1/requests/{call}").json()["data"]
    assert detail["scores"] == [thumb]
    # The span itself, listed with every kind, counts its thumb once.
    every = {item["id"]: item["scores"] for item in listed(scores_api, tag, kind="all")}
    assert every == {span: {"thumbs": 0}, call: {"thumbs": 0}}


def test_score_filters_and_unscored_count_the_span_s_thumb_for_the_model_call(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    _, span, call = observed_call(scores_api, tag)
    _, _, unscored_call = observed_call(scores_api, tag)
    thumbs_down(scores_api, span)
    assert [i["id"] for i in listed(scores_api, tag, **{"score.thumbs": "false"})] == [call]
    assert [i["id"] for i in listed(scores_api, tag, **{"score.thumbs.max": 0.5})] == [call]
    assert [i["id"] for i in listed(scores_api, tag, unscored="thumbs")] == [unscored_call]


def test_a_thumb_that_arrives_before_its_span_counts_once_the_span_lands(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    trace, span, call = observed_call(scores_api, tag, log=False)
    thumbs_down(scores_api, span)
    log_trace(scores_api, tag, trace)
    assert listed(scores_api, tag)[0]["scores"] == {"thumbs": 0}
    assert [i["id"] for i in listed(scores_api, tag, **{"score.thumbs": "false"})] == [call]
    assert listed(scores_api, tag, unscored="thumbs") == []


def test_score_analytics_by_version_count_the_thumb_in_the_model_call_s_version(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    _, span, _ = observed_call(scores_api, tag)
    _, _, other_call = observed_call(scores_api, tag)
    thumbs_down(scores_api, span)
    created(scores_api, request_id=other_call, name="thumbs", value=True)
    response = scores_api.get(
        "/v1/requests/analytics",
        params={
            "metric": "score",
            "score_name": "thumbs",
            "group_by": "version",
            "metadata.tag": tag,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()["data"]
    assert [(g["name"], g["value"], g["count"]) for g in body["groups"]] == [("3", 0.5, 2)]
    assert (body["total"], body["score_count"]) == (0.5, 2)


def test_an_export_carries_the_span_s_thumb_on_the_model_call(scores_api: TestClient) -> None:
    tag = uuid.uuid4().hex[:8]
    _, span, call = observed_call(scores_api, tag)
    thumb = thumbs_down(scores_api, span)
    job = start(scores_api, format="json", filters={"metadata": {"tag": tag}})
    assert finish(scores_api, job["export_id"])["status"] == "completed"
    response = scores_api.get(f"/v1/requests/exports/{job['export_id']}/download")
    assert response.status_code == 200, response.text
    body = response.text
    rows = [json.loads(line) for line in body.splitlines() if line]
    assert [(row["id"], row["scores"]) for row in rows] == [(call, [thumb])]


def test_a_feedback_token_minted_for_the_span_counts_for_the_model_call(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    _, span, call = observed_call(scores_api, tag)
    minted = scores_api.post("/v1/scores/tokens", json={"request_id": span, "name": "thumbs"})
    assert minted.status_code == 201, minted.text
    browser = TestClient(scores_api.app)  # an end user: no key
    vote = browser.post(minted.json()["data"]["url"], json={"value": False})
    assert vote.status_code in (200, 201), vote.text
    assert listed(scores_api, tag)[0]["scores"] == {"thumbs": 0}
    assert [i["id"] for i in listed(scores_api, tag, **{"score.thumbs": "false"})] == [call]


def test_the_trace_counts_the_span_s_thumb_once_and_its_page_shows_it_on_the_call(
    scores_api: TestClient,
) -> None:
    tag = uuid.uuid4().hex[:8]
    trace, span, call = observed_call(scores_api, tag)
    thumbs_down(scores_api, span)
    created(scores_api, trace_id=trace, name="thumbs", value=True)
    page = scores_api.get(f"/v1/traces/{trace}").json()["data"]
    assert page["scores"] == {"thumbs": 0.5}
    assert {item["id"]: item["scores"] for item in page["items"]} == {
        span: {"thumbs": 0.5},
        call: {"thumbs": 0.5},
    }
    # The scores list keeps the score on the record it was given for.
    on_span = scores_api.get("/v1/scores", params={"request_id": span}).json()["data"]
    assert [(s["request_id"], s["trace_id"]) for s in on_span] == [(span, None)]


def test_a_span_record_s_own_score_counts_once_in_its_trace_s_list(
    scores_api: TestClient,
) -> None:
    tag, name = uuid.uuid4().hex[:8], f"q_{uuid.uuid4().hex[:8]}"
    trace, span, call = observed_call(scores_api, tag)
    created(scores_api, request_id=span, name=name, value=0.2)
    created(scores_api, trace_id=trace, name=name, value=1.0)
    created(scores_api, request_id=call, name=name, value=0.0)
    # The span's score is its trace's: the span record's mean (0.2 + 1.0) / 2 = 0.6 (0.47
    # were it counted for itself too); the call's (0.0 + 0.2 + 1.0) / 3 = 0.4.
    passing = listed(scores_api, tag, trace_id=trace, **{f"score.{name}.min": "0.55"})
    assert [item["id"] for item in passing] == [span]
    passing = listed(scores_api, tag, trace_id=trace, **{f"score.{name}.max": "0.45"})
    assert [item["id"] for item in passing] == [call]


@pytest.mark.cost
def test_a_filtered_page_leaves_out_only_the_span_records_it_can_return(
    scores_api: TestClient,
) -> None:
    """A name scored on traces once left every span record of the project out of its
    records' own sums (~3M ids at 10M records): now those among the records the page can
    return (a trace's list here; a list by metadata, which reads its candidates from the
    metadata index, still leaves every span out)."""
    tag = uuid.uuid4().hex[:8]
    trace, span, call = observed_call(scores_api, tag)
    created(scores_api, trace_id=trace, name="thumbs", value=True)
    table = scores_api.app.state.services.store.scores.table
    with counted_queries(scores_api) as seen:
        response = scores_api.get(
            "/v1/requests", params={"trace_id": trace, "score.thumbs.min": "0.5"}
        )
    assert response.status_code == 200, response.text
    assert {item["id"] for item in response.json()["data"]} == {span, call}
    every_span = f"NOT IN ({span_ids(table)})"
    assert not any(every_span in sql for sql in seen), seen
