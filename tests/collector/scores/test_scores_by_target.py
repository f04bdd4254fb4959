"""A record's detail and a list page read scores by target (migration 22), and stay exact.

``scores_by_target`` keeps every version of every score in target order; a read takes the
newest version of each (target, id) and keeps it when live. These tests change scores every
way the API allows (replace, move to another record or to a trace, delete, batches repeating
an id) and compare what a detail and a list page show with the reference: each id's newest
version, resolved from ``scores`` itself. And a store upgraded to 22 shows the scores stored
before it, a score moved the old way (no tombstone) on its new target only.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.schema import Migration
from promptrail.collector.store.score_tables import SCORES_BY_TARGET_SEED
from promptrail.collector.store.scores import ScoreStore
from tests.collector.scores.steps import counted_queries, created, listed, log, scores_upgraded


def reference(api: TestClient, targets: list[str]) -> dict[str, set[tuple[str, str, str]]]:
    """Per target: the (id, name, value) of the live scores on it, from ``scores`` by id."""
    client = api.app.state.services.store.client
    database = api.app.state.services.store.database
    rows = client.query(
        "SELECT id, if(s.2 != '', s.2, s.1), s.3, s.4 FROM (SELECT id, argMax(tuple("
        "request_id, trace_id, name, value, is_deleted), written_at) AS s FROM "
        f"`{database}`.scores WHERE project = 'default' GROUP BY id) WHERE s.5 = 0",
    ).result_rows
    found: dict[str, set[tuple[str, str, str]]] = {t: set() for t in targets}
    for score_id, target, name, value in rows:
        if target in found:
            found[target].add((score_id, name, value))
    return found


def shown(score: dict[str, Any]) -> tuple[str, str, str]:
    """A score as the API answers it, as ``reference`` gives it (the value's JSON text)."""
    return score["id"], score["name"], json.dumps(score["value"], ensure_ascii=False)


def test_random_changes_show_each_record_exactly_its_live_scores(scores_api: TestClient) -> None:
    rng = random.Random(22)
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    records = [log(scores_api, tag, n, trace if n < 3 else None) for n in range(5)]
    ids = [f"sc_{tag}_{i}" for i in range(10)]
    values: list[Any] = [0.0, 0.5, 1, True, False, "x", "y"]
    live: set[str] = set()
    for step in range(60):
        sid = rng.choice(ids)
        if rng.random() < 0.15 and sid in live:
            assert scores_api.delete(f"/v1/scores/{sid}").status_code == 200
            live.discard(sid)
            continue
        value = rng.choice(values)
        name = f"n_{type(value).__name__}_{tag}"
        target = {"trace_id": trace} if rng.random() < 0.2 else {"request_id": rng.choice(records)}
        if rng.random() < 0.3:  # a batch repeating the id: the last one stands
            batch = [
                {"id": sid, "name": f"first_{tag}", "value": 0.3, **target},
                {"id": sid, "name": name, "value": value, **target},
            ]
            response = scores_api.post("/v1/scores/batch", json={"scores": batch})
            assert response.status_code == 201, response.text
        else:
            created(scores_api, id=sid, name=name, value=value, **target)
        live.add(sid)
        if step % 15 != 14:
            continue
        truth = reference(scores_api, [*records, trace])
        for record in records:
            detail = scores_api.get(f"/v1/requests/{record}").json()["data"]
            expected = truth[record] | (truth[trace] if record in records[:3] else set())
            assert {shown(s) for s in detail["scores"]} == expected, (step, record)
        listing = scores_api.get("/v1/scores", params={"trace_id": trace}).json()["data"]
        assert {shown(s) for s in listing} == truth[trace]
        # The narrow read behind list items' means (ScoreValue) finds the same scores, in the
        # same order, as the full one behind the detail.
        store = scores_api.app.state.services.store.scores
        full = store.for_targets("default", records, [trace])
        narrow = store.values_on_targets("default", records, [trace])
        assert [
            (s.id, s.request_id, s.trace_id, s.name, s.data_type, s.value, s.created_at)
            for s in full
        ] == [
            (s.id, s.request_id, s.trace_id, s.name, s.data_type, s.value, s.created_at)
            for s in narrow
        ], step


@pytest.fixture
def upgraded(settings: Settings) -> Iterator[tuple[Any, str]]:
    """A store as release 21 left it, holding scores written before migration 16 (no
    tombstone before a replacement), upgraded by migration 22."""
    with scores_upgraded(settings, 22) as store:
        yield store


def test_migration_22_shows_the_scores_stored_before_on_their_targets(
    upgraded: tuple[Any, str],
) -> None:
    client, database = upgraded
    store = ScoreStore(client, database)

    def on(*targets: str) -> list[tuple[str, Any]]:
        requests = [t for t in targets if t.startswith("r")]
        traces = [t for t in targets if t.startswith("t")]
        return sorted((s.id, s.value) for s in store.for_targets("default", requests, traces))

    assert on("r1") == []  # sc1 moved away, sc2 deleted
    assert on("r2") == [("sc1", 0.2)]
    assert on("r1", "r2", "t1") == [("sc1", 0.2), ("sc3", True)]
    # The seed run again (two collectors migrating at once) changes nothing a read shows.
    (seed,) = migrations.migration_statements(
        Migration(22, "again", (SCORES_BY_TARGET_SEED,)), database, None
    )
    client.command(seed)
    assert on("r1", "r2", "t1") == [("sc1", 0.2), ("sc3", True)]
    # Another project's score on r1 is its own.
    assert [(s.id, s.value) for s in store.for_targets("other", ["r1", "r2"])] == [("sc4", "a")]


def test_a_score_filtered_page_reads_the_newest_day_first_and_misses_nothing(
    scores_api: TestClient,
) -> None:
    """A list page tries the newest day, then 8 days, then everything (request_filters.
    windows); with a score filter each try reads the sums of its own window's records. The
    pages across all three tries are exactly the records that pass, newest first."""
    tag, trace = uuid.uuid4().hex[:8], uuid.uuid4().hex
    now = datetime.now(UTC)
    name, kind = f"h_{tag}", f"c_{tag}"

    def record(n: int, age: timedelta, on_trace: bool = False) -> str:
        at = (now - age).isoformat().replace("+00:00", "Z")
        extra: dict[str, Any] = {"created_at": at, "prompt_name": f"p_{tag}"}
        return log(scores_api, tag, n, trace if on_trace else None, **extra)

    fresh_high = record(1, timedelta(hours=1))
    fresh_traced = record(2, timedelta(hours=2), on_trace=True)
    fresh_low = record(3, timedelta(hours=3))
    fresh_none = record(4, timedelta(hours=4))
    week = record(5, timedelta(days=3))
    month = record(6, timedelta(days=20))
    created(scores_api, request_id=fresh_high, name=name, value=0.9)
    created(scores_api, trace_id=trace, name=name, value=0.8)
    created(scores_api, request_id=fresh_low, name=name, value=0.1)
    created(scores_api, request_id=week, name=name, value=1.0)
    created(scores_api, request_id=month, name=name, value=0.75)
    created(scores_api, request_id=fresh_low, name=kind, value="bad")
    created(scores_api, request_id=month, name=kind, value="bad")

    def pages(**params: Any) -> list[str]:
        ids: list[str] = []
        cursor = None
        while True:
            query = {"prompt_name": f"p_{tag}", "limit": 2, **params}
            if cursor:
                query["cursor"] = cursor
            response = scores_api.get("/v1/requests", params=query)
            assert response.status_code == 200, response.text
            body = response.json()
            ids += [item["id"] for item in body["data"]]
            cursor = body["pagination"].get("next_cursor")
            if not cursor:
                return ids

    assert pages(**{f"score.{name}.min": 0.7}) == [fresh_high, fresh_traced, week, month]
    assert pages(**{f"score.{name}.max": 0.5}) == [fresh_low]
    assert pages(**{f"score.{kind}": "bad"}) == [fresh_low, month]
    assert pages(unscored=name) == [fresh_none]
    both = {f"score.{name}.min": 0.5, f"score.{kind}": "bad"}
    assert pages(**both) == [month]


@pytest.mark.cost
def test_a_page_without_traces_reads_its_scores_in_one_key_read(scores_api: TestClient) -> None:
    """Only a trace brings the scores on its span records (score_sql.score_versions): a page
    of records outside any trace reads its scores without looking span records up."""
    tag = uuid.uuid4().hex[:8]
    first, second = log(scores_api, tag, 1), log(scores_api, tag, 2)
    created(scores_api, request_id=first, name="q", value=0.25)
    created(scores_api, request_id=second, name="q", value=0.75)
    with counted_queries(scores_api) as seen:
        items = listed(scores_api, tag)
    assert {item["id"]: item["scores"] for item in items} == {
        first: {"q": 0.25},
        second: {"q": 0.75},
    }
    reads = [sql for sql in seen if "scores_by_target" in sql]
    assert reads and not any("trace_records" in sql for sql in reads), reads
