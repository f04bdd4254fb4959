"""A score-filtered list walks its windows exactly and sizes them from what it found
(issue 31's list target).

A list page with a score filter reads the log newest first in windows of time (the newest
hour, then wider ones: store/request_filters.py), each pass paying the score clause over its
window's records. A page a window cannot fill goes on below it. These tests walk every page
of very selective bounds through the cursors and compare them with the truth computed here,
and count the window reads of a page: the window after one that found a few of the page's
rows reaches as far as their density says the rest needs (before, it was the next fixed
window, and a bound that few records pass read one window after another). Real chDB, real
HTTP routes; the queries are counted on the collector's ClickHouse client.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.pages import pages, walk
from tests.collector.scores.steps import counted_queries

_WINDOW_READ = "ORDER BY created_at DESC, id DESC LIMIT"
_NEWEST = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
_STEP = timedelta(minutes=10)  # six records an hour, three days of them
_RECENT = 432
_OLD = (12, 15, 20)  # days back: records only the unbounded pass reaches


class Log:
    """The module's log: its records (newest first) and the mean of each one's scores."""

    def __init__(self, name: str, records: list[tuple[str, datetime]], means: dict[str, float]):
        self.name, self.records, self.means = name, records, means

    def passing(self, kind: str, bound: float) -> list[str]:
        """The ids a ``score.<name>.<kind>`` list holds, newest first."""
        return [
            rid
            for rid, _ in self.records
            if rid in self.means
            and (self.means[rid] >= bound if kind == "min" else self.means[rid] <= bound)
        ]


@pytest.fixture(scope="module")
def score_log(scores_api: TestClient) -> Iterator[Log]:
    """A log of 432 recent records (one every 10 minutes) and three weeks-old ones, scored so
    that a bound of 0.9 passes one record an hour, 0.99 a few over weeks."""
    tag, name = uuid.uuid4().hex[:8], f"windows_{uuid.uuid4().hex[:6]}"
    trace = uuid.uuid4().hex
    times = [_NEWEST - _STEP * i for i in range(_RECENT)]
    times += [_NEWEST - timedelta(days=d) for d in _OLD]
    records: list[tuple[str, datetime]] = []
    bodies: list[dict[str, Any]] = []
    for i, at in enumerate(times):
        rid = f"req_{tag}_{i:04d}"
        body: dict[str, Any] = {
            "id": rid,
            "created_at": at.isoformat().replace("+00:00", "Z"),
            "model": "gpt-4o-mini",
            "output": {"content": f"answer {i}"},
        }
        if i in (100, 101, 102):  # a trace, scored as a whole
            body |= {"trace_id": trace, "span_id": f"{i:016x}"}
        bodies.append(body)
        records.append((rid, at))
    response = scores_api.post("/v1/requests/batch", json={"records": bodies})
    assert response.status_code == 201, response.text

    own: dict[str, list[float]] = {}
    for i, (rid, _) in enumerate(records):
        if i >= _RECENT or i in (50, 200, 430):
            own[rid] = [0.999]  # the rare ones
        elif i % 6 == 0:
            own[rid] = [0.95]
        elif i % 6 == 3:
            own[rid] = [1.0, 0.5]  # a mean of 0.75: passes 0.7, not 0.9
        elif i % 6 in (1, 4):
            own[rid] = [0.2]
        # the rest (i % 6 in (2, 5)) unscored: only the trace may score them
    scores = [
        {"id": f"sc_{tag}_{rid}_{k}", "request_id": rid, "name": name, "value": value}
        for rid, values in own.items()
        for k, value in enumerate(values)
    ]
    scores.append({"id": f"sc_{tag}_trace", "trace_id": trace, "name": name, "value": 0.97})
    for first in range(0, len(scores), 1000):
        response = scores_api.post(
            "/v1/scores/batch", json={"scores": scores[first : first + 1000]}
        )
        assert response.status_code == 201, response.text
        assert response.json()["data"]["rejected"] == [], response.text

    means: dict[str, float] = {}
    for i, (rid, _) in enumerate(records):
        values = own.get(rid, []) + ([0.97] if i in (100, 101, 102) else [])
        if values:
            means[rid] = sum(values) / len(values)
    yield Log(name, records, means)


@pytest.mark.parametrize(
    ("kind", "bound"), [("min", 0.99), ("min", 0.9), ("min", 0.7), ("max", 0.3)]
)
def test_every_page_of_a_bound_is_exact_across_windows(
    scores_api: TestClient, score_log: Log, kind: str, bound: float
) -> None:
    expected = score_log.passing(kind, bound)
    assert expected  # the bound passes some
    params = {f"score.{score_log.name}.{kind}": bound}
    for limit in (1, 4, 7) if kind == "min" and bound == 0.99 else (5, 13):
        walked = list(pages(scores_api, limit, **params))
        assert [rid for page in walked for rid in page] == expected, (limit, bound)
        # Every page is whole: only the last may be short.
        assert all(len(page) == limit for page in walked[:-1]), [len(p) for p in walked]


@pytest.mark.cost
def test_the_window_after_a_thin_one_reaches_as_far_as_its_density_says(
    scores_api: TestClient, score_log: Log
) -> None:
    # A filter no other page asked for (every record succeeded): the first page of a filter
    # has no density hint to start from (see the next test).
    params = {f"score.{score_log.name}.min": 0.9, "status": "success"}
    expected = score_log.passing("min", 0.9)
    walk(scores_api, 5, **{f"score.{score_log.name}.min": 0.95})  # the newest time is read
    with counted_queries(scores_api) as seen:
        first = next(pages(scores_api, 5, **params))
    assert first == expected[:5]
    # The newest 2 hours hold three of the six records the page reads (five, and one to
    # know there is more); the second window reaches twice as far as the three missing take
    # at that density: 4 hours below the first. Before, the first window was the hour (two
    # of them) and the second the 4 hours from the top (three): a third pass read the day.
    passes = [sql for sql in seen if _WINDOW_READ in sql]
    assert len(passes) == 2, seen
    # The second reads the sums of its own window's records only, not again those of the
    # 2 hours above it: each of its lower bounds (the log's read, the score clause's record and
    # trace halves, and the span records its record half leaves out, which count for their
    # traces) has an upper one; the record half bounds the record times of the sums by
    # time (migration 42), the other three the records' own.
    lower, upper = "created_at >= {lower:", "created_at < {upper:"
    assert passes[1].count(upper) == passes[1].count(lower) == 3, passes[1]
    lower, upper = "record_at >= {lower:", "record_at < {upper:"
    assert passes[1].count(upper) == passes[1].count(lower) == 1, passes[1]


@pytest.mark.cost
def test_the_next_page_of_a_thin_filter_starts_as_wide_as_the_last_one_needed(
    scores_api: TestClient, score_log: Log
) -> None:
    # 0.99 passes a few records over weeks: a first page reads window after window.
    params = {f"score.{score_log.name}.min": 0.99, "status": "success"}  # a filter of its own
    expected = score_log.passing("min", 0.99)
    walk(scores_api, 5, **{f"score.{score_log.name}.min": 0.95})  # the newest time is read
    with counted_queries(scores_api) as seen:
        first = next(pages(scores_api, 2, **params))
    assert first == expected[:2]
    cold = [sql for sql in seen if _WINDOW_READ in sql]
    assert len(cold) >= 2, cold
    # The same page again (a reload, a reviewer coming back): the density the last page saw
    # sizes its first window, which holds the page.
    with counted_queries(scores_api) as seen:
        again = next(pages(scores_api, 2, **params))
    assert again == first
    hinted = [sql for sql in seen if _WINDOW_READ in sql]
    assert len(hinted) < len(cold), (hinted, cold)
    # And every page through the cursors stays exact with the hint.
    walked = list(pages(scores_api, 2, **params))
    assert [rid for page in walked for rid in page] == expected
