"""The activity rollup's view reads a record's session and user once (migration 50), where it
repeated the whole metadata map for each key: the same rollup rows for less of every insert's
CPU. The rows it writes equal the old query's for the same records (sessions with and without
a user, users alone, empty and non-string values, kinds, days, retried copies, tombstones),
and a store made before migration 50 reads the same after it."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_filters import RequestFilter
from promptrail.collector.store.request_rows import RequestRow, encode_rows
from promptrail.collector.store.requests import RequestStore
from promptrail.collector.store.schema import ModifyQuery, render
from promptrail.collector.store.thread_tables import ACTIVITY_ROLLUP_MV_BEFORE_50
from promptrail.collector.store.traces import TraceStore
from tests.collector.upgrades import store_before

NOW = datetime.now(UTC).replace(microsecond=0)
PERIOD = (NOW - timedelta(days=10), NOW + timedelta(minutes=1))


def _records() -> list[RequestRow]:
    """Every shape of session and user a record's metadata can hold, over three days."""
    shapes: list[dict[str, Any]] = [
        {"user_id": "u1", "session_id": "s1"},
        {"user_id": "u2", "session_id": "s1"},  # a session of two users
        {"session_id": "s2"},  # a session without a user
        {"user_id": "u3"},  # a user without a session
        {"user_id": "", "session_id": "s3"},  # an empty user: none
        {"user_id": "u4", "session_id": ""},  # an empty session: none
        {"user_id": 7, "session_id": {"n": 1}},  # values that are not strings
        {"team": "a"},  # neither
        {"user_id": "u1", "session_id": "s1", "doomed": "yes"},  # tombstoned below
    ]
    return [
        RequestRow(
            id=f"req_roll-{i:03d}",
            created_at=NOW - timedelta(days=i % 3, minutes=i),
            model="" if i % 5 == 0 else "gpt-4o-mini",
            kind="chain" if i % 5 == 0 else "llm",
            span_id=f"{i + 1:016x}" if i % 5 == 0 else "",
            metadata=shapes[i % len(shapes)],
            total_tokens=i,
        )
        for i in range(40)
    ]


def _store(client: Any, database: str, project: str, rows: list[RequestRow]) -> None:
    """Insert ``rows`` of ``project`` (a third of them twice: retried copies), then tombstone
    the doomed ones, as the ingest and delete routes write them."""
    store = RequestStore(client, database)
    encoded = [asdict(row) for row in rows]
    store.insert([encode_rows(project, encoded), encode_rows(project, encoded[::3])])
    deleted = store.delete_matching(
        project, RequestFilter(metadata={"doomed": "yes"}, public_only=False)
    )
    assert deleted == sum(1 for row in rows if row.metadata.get("doomed"))


def _rollup(client: Any, database: str, project: str) -> list[tuple[Any, ...]]:
    """The rollup's rows of ``project``, each key's parts combined as a read combines them."""
    return [
        tuple(row)
        for row in client.query(
            "SELECT key, value, day, kind, max(last_at), sum(tombstones), "
            "arraySort(groupUniqArrayArray(user_ids)) "
            f"FROM `{database}`.activity_rollup WHERE project = {{p:String}} "
            "GROUP BY key, value, day, kind ORDER BY key, value, day, kind",
            parameters={"p": project},
        ).result_rows
    ]


def _pages(client: Any, database: str, project: str) -> tuple[Any, ...]:
    """The session and user lists of ``project``, which take their candidates from the rollup."""
    reads = TraceStore(client, database)
    return (
        reads.session_page(project, PERIOD, None, None, None, 50),
        reads.session_page(project, PERIOD, None, "u1", None, 50),
        reads.user_page(project, PERIOD, None, None, 50),
        reads.session_page(project, PERIOD, ["llm"], None, None, 2),
    )


def test_a_store_from_before_migration_50_reads_the_same_and_new_rows_match_the_old(
    settings: Settings,
) -> None:
    rows = _records()
    old_query = render(ModifyQuery(ACTIVITY_ROLLUP_MV_BEFORE_50), settings.database, None)
    store_before(settings, 50, [], statements=old_query)
    client = open_client(settings.store_url)
    try:
        _store(client, settings.database, "default", rows)
        rolled = _rollup(client, settings.database, "default")
        # Every session and user with a value is there, a session's users beside it.
        assert {(key, value) for key, value, *_ in rolled} == {
            ("session_id", "s1"),
            ("session_id", "s2"),
            ("session_id", "s3"),
            ("session_id", '{"n":1}'),
            ("user_id", "u1"),
            ("user_id", "u2"),
            ("user_id", "u3"),
            ("user_id", "u4"),
            ("user_id", "7"),
        }
        assert {v for key, value, *_, users in rolled if key == "session_id" for v in users} == {
            "u1",
            "u2",
            "7",
        }
        assert sum(row[5] for row in rolled) > 0  # the tombstones are counted
        pages = _pages(client, settings.database, "default")
        assert [s.session_id for s, _ in pages[0]]  # the lists are not empty

        # Migration 50 and every one after it.
        assert migrations.migrate(client, settings.database) == [
            m.version for m in migrations.MIGRATIONS if m.version >= 50
        ]
        query = client.query(
            "SELECT as_select FROM system.tables WHERE database = {d:String} "
            "AND name = 'activity_rollup_mv'",
            parameters={"d": settings.database},
        ).result_rows[0][0]
        assert "session_id" in query and "ARRAY JOIN" in query
        # The rows stored before read as they did.
        assert _rollup(client, settings.database, "default") == rolled
        assert _pages(client, settings.database, "default") == pages

        # The same records in another project, through the new view: the same rows.
        _store(client, settings.database, "other", rows)
        assert _rollup(client, settings.database, "other") == rolled
        assert _pages(client, settings.database, "other") == pages
    finally:
        client.close()


def test_migration_50_gives_the_view_its_query_on_each_shard() -> None:
    """On a cluster each shard's view reads that shard's log; the view is never dropped."""
    (migration,) = [m for m in migrations.MIGRATIONS if m.version == 50]
    (statement,) = migrations.migration_statements(migration, "pr", "c")
    assert statement.startswith("ALTER TABLE `pr`.`activity_rollup_mv` ON CLUSTER `c` MODIFY QUERY")
    assert "FROM `pr`.requests_local)" in statement
    assert "[session_id, user_id] AS value" in statement
