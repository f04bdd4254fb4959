"""A score-filtered list of a quiet log starts its windows at the log's newest record
(issue 31's list target).

The log here is quiet: its records are months older than now. A page used to try the hour
before now first (paying the score clause for nothing), then read ``max(created_at)``, then
try the windows again from there. The process now keeps a hint of the newest record's time
(read from the store at most every few seconds, raised by the ingest path), and the windows
are lower bounds only, so any hint keeps a page exact: these tests also set one older and
one newer than the log. The queries are counted on the collector's real ClickHouse client.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.scores.steps import counted_queries, created, log

_NEWEST_READ = "max(created_at)"
_WINDOW_READ = "ORDER BY created_at DESC, id DESC LIMIT"


def _listed(api: TestClient, limit: int = 100, **params: Any) -> list[str]:
    """The ids of a list page without metadata: the windowed scan of the log."""
    response = api.get("/v1/requests", params={"limit": limit, **params})
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]]


def _hint(api: TestClient) -> Any:
    return api.app.state.services.store.requests._newest_hint  # type: ignore[attr-defined]


@pytest.mark.cost
def test_a_page_of_a_quiet_log_reads_no_empty_window_and_no_newest_time(
    scores_api: TestClient,
) -> None:
    tag, name = uuid.uuid4().hex[:8], f"helpful_{uuid.uuid4().hex[:6]}"
    first, second, low = log(scores_api, tag, 1), log(scores_api, tag, 2), log(scores_api, tag, 3)
    created(scores_api, request_id=first, name=name, value=0.9)
    created(scores_api, request_id=second, name=name, value=1)
    created(scores_api, request_id=low, name=name, value=0.2)
    bound = {f"score.{name}.min": 0.5}
    assert _listed(scores_api, **bound) == [second, first]  # the hint is read (once)

    with counted_queries(scores_api) as seen:
        assert _listed(scores_api, **bound) == [second, first]
        assert _listed(scores_api) == [low, second, first]
    assert not [sql for sql in seen if _NEWEST_READ in sql], seen
    # A page of one: its first window, counted back from the newest record (not from now),
    # fills it.
    with counted_queries(scores_api) as seen:
        assert _listed(scores_api, limit=1, **bound) == [second]
        assert _listed(scores_api, limit=1) == [low]
    assert not [sql for sql in seen if _NEWEST_READ in sql], seen
    assert len([sql for sql in seen if _WINDOW_READ in sql]) == 2, seen

    # A record stored meanwhile raises the hint: still listed, still no read of the newest.
    later = log(scores_api, tag, 4, created_at="2026-03-02T09:00:00Z")
    created(scores_api, request_id=later, name=name, value=0.7)
    with counted_queries(scores_api) as seen:
        assert _listed(scores_api, **bound) == [later, second, first]
    assert not [sql for sql in seen if _NEWEST_READ in sql], seen


@pytest.mark.cost
def test_a_hint_older_or_newer_than_the_log_keeps_the_page_exact(
    scores_api: TestClient,
) -> None:
    tag, name = uuid.uuid4().hex[:8], f"exact_{uuid.uuid4().hex[:6]}"
    kept = log(scores_api, tag, 5, created_at="2026-03-03T10:00:00Z")
    created(scores_api, request_id=kept, name=name, value=0.8)
    bound = {f"score.{name}.min": 0.5}
    hint = _hint(scores_api)

    # Older than the log (records another process stored): the first window reads more.
    hint.read(datetime(2025, 1, 1, tzinfo=UTC))
    with counted_queries(scores_api) as seen:
        assert _listed(scores_api, **bound) == [kept]
    assert not [sql for sql in seen if _NEWEST_READ in sql], seen

    # Newer than the log (records gone): the first window is empty, the page reads where the
    # log ends and goes on from there.
    hint.read(datetime(2026, 6, 1, tzinfo=UTC))
    with counted_queries(scores_api) as seen:
        assert _listed(scores_api, **bound) == [kept]
    assert len([sql for sql in seen if _NEWEST_READ in sql]) == 1, seen
