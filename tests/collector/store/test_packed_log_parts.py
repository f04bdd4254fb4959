"""On the embedded store the log's parts under 64 MiB are one file each (migration 52), read as
any other part, before and after the upgrade; a ClickHouse server is never asked to."""

from __future__ import annotations

from contextlib import closing

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.migrations import MIGRATIONS, migration_statements
from promptrail.collector.store.request_tables import PACKED_PARTS
from tests.collector.upgrades import insert_rows, store_before, wide_rows
from tests.keys import DEFAULT_AUTH

# The tables every insert into the log writes (the wide_rows records have no trace and no
# session, so the trace and thread copies get no row from them).
_WRITTEN = {
    "requests",
    "request_items",
    "request_metadata",
    "request_ids",
    "request_prompts",
    "request_touches",
    "evaluation_arrivals",
}


def _storage(settings: Settings) -> dict[tuple[str, str], int]:
    """Active parts of the log's tables by (table, storage type) -> rows."""
    with closing(open_client(settings.store_url)) as client:
        rows = client.query(
            "SELECT table, part_storage_type, sum(rows) FROM system.parts "
            "WHERE database = {db:String} AND active GROUP BY table, part_storage_type",
            parameters={"db": settings.database},
        ).result_rows
    return {(str(t), str(s)): int(n) for t, s, n in rows if t in _WRITTEN}


def _merge_all(settings: Settings) -> None:
    with closing(open_client(settings.store_url)) as client:
        for table in ("requests", "request_items"):
            client.command(f"OPTIMIZE TABLE `{settings.database}`.{table} FINAL")


def test_an_upgraded_log_writes_new_parts_packed_and_reads_old_and_new_alike(
    settings: Settings,
) -> None:
    before = wide_rows("before", 300, 2_000)
    store_before(settings, 52, before)
    # A release before migration 52 wrote a file per column (or one per part) and index.
    assert {key[1] for key in _storage(settings)} == {"Full"}
    assert {key[0] for key in _storage(settings)} == _WRITTEN

    app = create_app(settings)  # start-up applies migration 52
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        after = wide_rows("after", 300, 2_000)
        insert_rows(settings, after)
        stored = _storage(settings)
        # Every table the insert wrote has its new part packed; the old parts stay as they were.
        # (Project default has no evaluation rule: since migration 53 its records no longer
        # arrive for the evaluation worker.)
        assert set(stored) == {(table, "Full") for table in _WRITTEN} | {
            (table, "Packed") for table in _WRITTEN - {"evaluation_arrivals"}
        }
        assert stored[("requests", "Full")] == stored[("requests", "Packed")] == 300

        def reads_every_record() -> None:
            for batch, rows in (("before", before), ("after", after)):
                for record in (rows[0], rows[150], rows[-1]):
                    detail = api.get(f"/v1/requests/{record.id}").json()["data"]
                    assert detail["output"] == record.output
                record = rows[7]
                page = api.get(
                    "/v1/requests", params={"metadata.batch": batch, "limit": "100"}
                ).json()
                assert [r["id"] for r in page["data"]] == [r.id for r in rows[::-1][:100]]
                found = api.get(
                    "/v1/requests/search", params={"query": f"{batch}marker7end"}
                ).json()
                assert [r["id"] for r in found["data"]] == [record.id]

        reads_every_record()
        # A merge of a packed part with a full one: one part, the same answers.
        _merge_all(settings)
        assert _storage(settings)[("requests", "Packed")] == 600
        reads_every_record()


def test_only_the_embedded_store_is_given_packed_parts() -> None:
    (migration,) = [m for m in MIGRATIONS if m.version == 52]
    embedded = migration_statements(migration, "db", None, embedded=True)

    assert embedded == [
        f"ALTER TABLE `db`.`{table}` MODIFY SETTING {PACKED_PARTS}"
        for table in (
            "requests",
            "request_items",
            "request_metadata",
            "request_ids",
            "trace_records",
            "thread_items",
            "activity_rollup",
            "request_touches",
            "request_prompts",
            "evaluation_arrivals",
            "api_key_usage",
        )
    ]
    # A server, or a cluster, of a release before 26.7 does not know the setting.
    assert migration_statements(migration, "db", None) == []
    assert migration_statements(migration, "db", "c") == []
