"""Migration 26: score writes no longer feed ``score_targets`` (helper B41, issue 31 ingest).

Reads that took their candidate ids from ``score_targets`` take them from
``scores_by_target``; an upgraded store answers them as it did before the migration, and a
score written afterwards is found although ``score_targets`` never sees it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.score_rows import ScoreQuery, ScoreRow
from promptrail.collector.store.scores import ScoreStore
from tests.collector.scores.steps import insert_old_scores
from tests.collector.upgrades import store_before


def _pages(store: ScoreStore) -> dict[str, list[tuple[str, str | None, str | None]]]:
    queries = {
        "r1": ScoreQuery(request_id="r1"),
        "r2": ScoreQuery(request_id="r2"),
        "t1": ScoreQuery(trace_id="t1"),
    }
    return {
        key: [(s.id, s.request_id, s.trace_id) for s in store.page("default", query, 50)]
        for key, query in queries.items()
    }


def test_an_upgraded_store_answers_the_same_and_finds_new_scores(settings: Settings) -> None:
    store_before(settings, 26, [])
    client = open_client(settings.store_url)
    database = settings.database
    try:
        insert_old_scores(client, database)
        store = ScoreStore(client, database)
        before = _pages(store)
        assert before["r2"] == [("sc1", "r2", None)] and before["r1"] == []
        assert 26 in migrations.migrate(client, database)
        views = client.query(
            "SELECT count() FROM system.tables WHERE database = {d:String} "
            "AND name = 'score_targets_mv'",
            parameters={"d": database},
        ).result_rows
        assert views == [(0,)]
        assert _pages(store) == before

        targets = f"`{database}`.score_targets"
        indexed = client.query(f"SELECT count() FROM {targets}").result_rows[0][0]
        row = ScoreRow(
            project="default",
            id="sc9",
            request_id="r3",
            trace_id=None,
            name="q",
            data_type="numeric",
            value=0.7,
            comment=None,
            correction=None,
            source="api",
            metadata={},
            created_at=datetime(2026, 3, 1, tzinfo=UTC),
        )
        store.insert([row])
        assert client.query(f"SELECT count() FROM {targets}").result_rows[0][0] == indexed
        assert [s.id for s in store.page("default", ScoreQuery(request_id="r3"), 50)] == ["sc9"]
        # Moved to another record: found there, no longer at the first.
        store.insert([ScoreRow(**{**row.__dict__, "request_id": "r4"})])
        assert store.page("default", ScoreQuery(request_id="r3"), 50) == []
        assert [s.id for s in store.page("default", ScoreQuery(request_id="r4"), 50)] == ["sc9"]
    finally:
        client.close()
