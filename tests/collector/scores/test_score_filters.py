"""A list's score filter leaves the trace half out for a name never scored on a trace, and
takes it in again as soon as one is (issue 31's list target).

The trace half of a ``score.<name>…`` clause (each record's trace sums, a join) cost as
much as the record half even on a log without a trace score: a page asks first which of its
names have sums on traces (one key read each). The queries are counted on the collector's
real ClickHouse client (a wrapper that passes every call through).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.store.request_filters import RequestFilter, windows
from promptrail.collector.store.score_sql import ScoreTest
from tests.collector.scores.steps import counted_queries, created, listed, log


@pytest.mark.cost
def test_a_name_scored_on_records_only_reads_no_trace_sums_until_a_trace_is_scored(
    scores_api: TestClient,
) -> None:
    tag, trace, name = uuid.uuid4().hex[:8], uuid.uuid4().hex, f"helpful_{uuid.uuid4().hex[:6]}"
    first, second = log(scores_api, tag, 1, trace), log(scores_api, tag, 2, trace)
    outside = log(scores_api, tag, 3)
    created(scores_api, request_id=first, name=name, value=0.9)
    created(scores_api, request_id=outside, name=name, value=0.2)

    def ids(**params: Any) -> list[str]:
        return [item["id"] for item in listed(scores_api, tag, **params)]

    def scanned(**params: Any) -> list[str]:
        # Without metadata: the windowed scan of the log, not the metadata index.
        dates = {"start_date": "2026-03-01", "end_date": "2026-03-01", "limit": 100}
        response = scores_api.get("/v1/requests", params={**dates, **params})
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["data"]]

    with counted_queries(scores_api) as seen:
        assert ids(**{f"score.{name}.min": 0.5}) == [first]
        assert scanned(**{f"score.{name}.min": 0.5}) == [first]
        assert ids(**{f"score.{name}": "0.2"}) == [outside]
        assert ids(unscored=name) == [second]
    assert seen and not [sql for sql in seen if "on_trace = 1" in sql and "LIMIT 1" not in sql]
    # Asked of the store once: the embedded store's one writer then knows the answer.
    assert len([sql for sql in seen if "on_trace = 1" in sql and "LIMIT 1" in sql]) == 1

    created(scores_api, trace_id=trace, name=name, value=1.0)
    with counted_queries(scores_api) as seen:
        # first: (0.9 + 1.0) / 2; second: the trace's 1.0 alone.
        assert ids(**{f"score.{name}.min": 0.95}) == [second, first]
        assert scanned(**{f"score.{name}.min": 0.95}) == [second, first]
        assert ids(**{f"score.{name}": "1.0"}) == [second, first]
        assert ids(unscored=name) == []
    assert [sql for sql in seen if "INNER JOIN" in sql]
    # The trace score's write told the process: no store read needed to learn it.
    assert not [sql for sql in seen if "on_trace = 1" in sql and "LIMIT 1" in sql]


def test_several_score_names_each_take_their_own_trace_half(scores_api: TestClient) -> None:
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    on_records, on_traces = f"r_{uuid.uuid4().hex[:6]}", f"t_{uuid.uuid4().hex[:6]}"
    traced, plain = log(scores_api, tag, 1, trace), log(scores_api, tag, 2)
    created(scores_api, request_id=traced, name=on_records, value=0.8)
    created(scores_api, request_id=plain, name=on_records, value=0.9)
    created(scores_api, trace_id=trace, name=on_traces, value="kind")
    found = listed(
        scores_api, tag, **{f"score.{on_records}.min": 0.5, f"score.{on_traces}": "kind"}
    )
    assert [item["id"] for item in found] == [traced]
    found = listed(scores_api, tag, **{f"score.{on_records}.min": 0.5, "unscored": on_traces})
    assert [item["id"] for item in found] == [plain]


@pytest.mark.cost
def test_a_score_filtered_page_tries_2_hours_then_4_hours_before_the_day() -> None:
    end = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
    scored = RequestFilter(end=end, scores=(ScoreTest("helpful", "min", 0.9),))
    hours = [timedelta(hours=2), timedelta(hours=4), timedelta(days=1), timedelta(days=8)]
    assert windows(scored, None) == [*(end - h for h in hours), None]
    # A page goes on below its cursor; a list without a score filter keeps the day and 8 days.
    after = (end - timedelta(days=2), "req_x")
    assert windows(scored, after) == [*(after[0] - h for h in hours), None]
    assert windows(RequestFilter(end=end), None) == [end - h for h in hours[2:]] + [None]


@pytest.mark.cost
def test_the_windows_count_back_from_the_newest_record_when_it_is_older_than_now() -> None:
    scored = RequestFilter(scores=(ScoreTest("helpful", "min", 0.9),))
    hours = [timedelta(hours=2), timedelta(hours=4), timedelta(days=1), timedelta(days=8)]
    quiet = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)  # the log's newest record, long ago
    assert windows(scored, None, quiet) == [*(quiet - h for h in hours), None]
    # A cursor or an end still anchors the page; a record dated ahead of now does not.
    after = (quiet - timedelta(days=3), "req_x")
    assert windows(scored, after, quiet) == [*(after[0] - h for h in hours), None]
    ahead = windows(scored, None, datetime.now(UTC) + timedelta(days=30))[0]
    assert ahead is not None and ahead < datetime.now(UTC)


@pytest.mark.cost
def test_a_quiet_log_s_score_filtered_list_reads_its_newest_records_first(
    scores_api: TestClient,
) -> None:
    tag, name = uuid.uuid4().hex[:8], f"q_{uuid.uuid4().hex[:6]}"
    ids = [log(scores_api, tag, n) for n in range(3)]  # on 2026-03-01, months before now
    for n, record in enumerate(ids):
        created(scores_api, request_id=record, name=name, value=0.2 + 0.3 * n)
    params = {f"score.{name}.min": 0.4, "start_date": "2026-03-01", "end_date": "2026-03-02"}
    response = scores_api.get("/v1/requests", params={**params, "limit": 1})
    assert response.status_code == 200, response.text
    assert [item["id"] for item in response.json()["data"]] == [ids[2]]
    cursor = response.json()["pagination"]["next_cursor"]
    response = scores_api.get("/v1/requests", params={**params, "limit": 5, "cursor": cursor})
    assert [item["id"] for item in response.json()["data"]] == [ids[1]]
    unbounded = scores_api.get("/v1/requests", params={f"score.{name}.min": 0.4, "limit": 5})
    assert [item["id"] for item in unbounded.json()["data"]] == [ids[2], ids[1]]
    with counted_queries(scores_api) as seen:
        first = scores_api.get("/v1/requests", params={f"score.{name}.min": 0.4, "limit": 1})
    assert [item["id"] for item in first.json()["data"]] == [ids[2]]
    # The hour before now holds nothing; the log's newest record (months ago, known to the
    # process: store/requests.py NewestHint) anchors the first window, which fills the page:
    # not the hour, 4 hours, the day, 8 days before now (each as empty) and then the whole log.
    passes = [sql for sql in seen if "ORDER BY created_at DESC, id DESC LIMIT" in sql]
    assert len(passes) == 1, passes
