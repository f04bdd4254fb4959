"""Schema: migrations are idempotent and recorded; cluster DDL renders Replicated engines."""

from __future__ import annotations

import pytest

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.migrations import MIGRATIONS, migrate, migration_statements
from promptrail.collector.store.prompts import PROMPT_HEADS_MV, PROMPT_VERSIONS, PROMPTS
from promptrail.collector.store.request_tables import (
    REQUEST_IDS,
    REQUEST_IDS_MV,
    REQUEST_ITEMS,
    REQUEST_ITEMS_MV,
    REQUEST_METADATA,
    REQUEST_METADATA_MV,
    REQUESTS,
)
from promptrail.collector.store.schema import (
    AddColumn,
    Backfill,
    DropIndex,
    ModifyColumn,
    ModifySetting,
    RoutedColumn,
    render,
    render_database,
)


def test_migrations_apply_once_and_are_recorded(fresh_settings: Settings) -> None:
    settings = fresh_settings
    client = open_client(settings.store_url)
    try:
        first = migrate(client, settings.database)
        second = migrate(client, settings.database)
        recorded = client.query(
            f"SELECT version, name FROM `{settings.database}`.schema_migrations FINAL "
            "ORDER BY version"
        ).result_rows
        tables = {
            r[0]
            for r in client.query(
                "SELECT name FROM system.tables WHERE database = {db:String}",
                parameters={"db": settings.database},
            ).result_rows
        }
    finally:
        client.close()

    assert first == [m.version for m in MIGRATIONS]
    assert second == []
    assert recorded == [(m.version, m.name) for m in MIGRATIONS]
    assert {
        "api_keys",
        "prompts",
        "prompt_versions",
        "prompt_heads",
        "prompt_labels",
        "requests",
        "exports",
    } <= tables


def test_single_server_ddl_uses_plain_engines_with_a_dedup_window() -> None:
    (ddl,) = render(PROMPT_VERSIONS, "promptrail", None)

    assert ddl.startswith("CREATE TABLE IF NOT EXISTS `promptrail`.`prompt_versions`\n")
    assert "ON CLUSTER" not in ddl
    assert "ENGINE = MergeTree()" in ddl
    assert "ORDER BY (project, prompt_id, version)" in ddl
    assert "SETTINGS index_granularity = 256, non_replicated_deduplication_window = 10000" in ddl


def test_insert_column_types_come_from_the_table_definition() -> None:
    assert PROMPT_VERSIONS.column_types(["version", "tags", "created_at"]) == [
        "UInt32",
        "Array(String)",
        "DateTime64(3, 'UTC')",
    ]


def test_cluster_ddl_is_on_cluster_with_replicated_engines() -> None:
    (ddl,) = render(PROMPTS, "promptrail", "main")

    assert "CREATE TABLE IF NOT EXISTS `promptrail`.`prompts` ON CLUSTER `main`" in ddl
    assert (
        "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/promptrail/tables/{database}/{table}',"
        " '{shard}-{replica}', row_version)"
    ) in ddl
    assert "SETTINGS replicated_deduplication_window = 10000" in ddl
    assert "non_replicated" not in ddl


def test_cluster_ddl_covers_database_and_views() -> None:
    assert render_database("promptrail", "main") == (
        "CREATE DATABASE IF NOT EXISTS `promptrail` ON CLUSTER `main`"
    )
    (view,) = render(PROMPT_HEADS_MV, "promptrail", "main")
    assert view.startswith(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS `promptrail`.`prompt_heads_mv` ON CLUSTER `main`"
    )
    assert "TO `promptrail`.`prompt_heads`" in view
    assert "FROM `promptrail`.prompt_versions" in view


def test_the_request_log_is_sharded_behind_a_distributed_table_on_a_cluster() -> None:
    local, distributed = render(REQUESTS, "promptrail", "main")
    (single,) = render(REQUESTS, "promptrail", None)

    assert local.startswith("CREATE TABLE IF NOT EXISTS `promptrail`.`requests_local` ON CLUSTER")
    assert (
        "ReplicatedReplacingMergeTree('/clickhouse/promptrail/tables/{shard}/{database}/{table}', "
        "'{replica}', row_version, is_deleted)"
    ) in local
    assert distributed == (
        "CREATE TABLE IF NOT EXISTS `promptrail`.`requests` ON CLUSTER `main` AS "
        "`promptrail`.`requests_local`\n"
        "ENGINE = Distributed(`main`, `promptrail`, `requests_local`, cityHash64(project, id))"
    )
    assert single.startswith("CREATE TABLE IF NOT EXISTS `promptrail`.`requests`\n")
    assert "ENGINE = ReplacingMergeTree(row_version, is_deleted)" in single


def test_the_metadata_index_is_filled_per_shard_on_a_cluster() -> None:
    local, distributed = render(REQUEST_METADATA, "promptrail", "main")
    (view,) = render(REQUEST_METADATA_MV, "promptrail", "main")
    (backfill,) = render(Backfill(REQUEST_METADATA_MV, REQUEST_METADATA), "promptrail", "main")

    assert local.startswith(
        "CREATE TABLE IF NOT EXISTS `promptrail`.`request_metadata_local` ON CLUSTER `main`"
    )
    assert (
        "ReplicatedReplacingMergeTree('/clickhouse/promptrail/tables/{shard}/{database}/{table}', "
        "'{replica}', row_version, is_deleted)"
    ) in local
    assert "ORDER BY (project, key, value, created_at, id)" in local
    assert distributed == (
        "CREATE TABLE IF NOT EXISTS `promptrail`.`request_metadata` ON CLUSTER `main` AS "
        "`promptrail`.`request_metadata_local`\n"
        "ENGINE = Distributed(`main`, `promptrail`, `request_metadata_local`, "
        "cityHash64(project, id))"
    )
    # Each shard's view reads that shard's inserts and writes its local index.
    assert view.startswith(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS `promptrail`.`request_metadata_mv` "
        "ON CLUSTER `main`\nTO `promptrail`.`request_metadata_local`\nAS SELECT "
    )
    assert "FROM `promptrail`.requests_local ARRAY JOIN" in view
    # The backfill goes table to table through the Distributed tables, run on each shard.
    assert backfill.startswith(
        "INSERT INTO `promptrail`.`request_metadata` (project, key, value, created_at, id, "
        "prompt_name, model, status, row_version, is_deleted)\nSELECT "
    )
    assert "FROM `promptrail`.requests ARRAY JOIN" in backfill
    assert backfill.endswith("SETTINGS parallel_distributed_insert_select = 2")


def test_the_metadata_index_on_one_server_reads_requests() -> None:
    (table,) = render(REQUEST_METADATA, "promptrail", None)
    (view,) = render(REQUEST_METADATA_MV, "promptrail", None)
    (backfill,) = render(Backfill(REQUEST_METADATA_MV, REQUEST_METADATA), "promptrail", None)

    assert "ENGINE = ReplacingMergeTree(row_version, is_deleted)" in table
    assert "TO `promptrail`.`request_metadata`\n" in view
    assert "FROM `promptrail`.requests ARRAY JOIN" in view
    assert "_local" not in view + backfill
    assert "SETTINGS" not in backfill


def test_the_id_index_lives_on_the_record_s_shard_and_replaces_the_bloom_filter() -> None:
    local, distributed = render(REQUEST_IDS, "promptrail", "main")
    (view,) = render(REQUEST_IDS_MV, "promptrail", "main")
    (drop,) = render(DropIndex(REQUESTS, "idx_id"), "promptrail", "main")
    (single_drop,) = render(DropIndex(REQUESTS, "idx_id"), "promptrail", None)

    assert "ORDER BY (project, id, created_at)" in local
    assert "SETTINGS index_granularity = 1024" in local
    assert distributed.endswith("`request_ids_local`, cityHash64(project, id))")
    assert "TO `promptrail`.`request_ids_local`\n" in view
    assert "FROM `promptrail`.requests_local WHERE row_version = 1" in view
    assert drop == (
        "ALTER TABLE `promptrail`.`requests_local` ON CLUSTER `main` DROP INDEX IF EXISTS `idx_id`"
    )
    assert single_drop == "ALTER TABLE `promptrail`.`requests` DROP INDEX IF EXISTS `idx_id`"
    assert all("idx_id" not in index for index in REQUESTS.indexes)


def test_the_items_copy_packs_the_shown_fields_in_fine_granules() -> None:
    local, distributed = render(REQUEST_ITEMS, "promptrail", "main")
    (view,) = render(REQUEST_ITEMS_MV, "promptrail", "main")
    (single_view,) = render(REQUEST_ITEMS_MV, "promptrail", None)
    (migration,) = [m for m in MIGRATIONS if m.name == "request_items"]
    (backfill,) = [
        s for s in migration_statements(migration, "promptrail", "main") if s.startswith("INSERT")
    ]

    # The key, the filters of a page, the two packed arrays, the span fields and price flag
    # the view gives from the record's (migration 51; ``trace_id`` is computed from
    # ``trace``) and the version columns.
    assert REQUEST_ITEMS.inserted_columns() == [
        "project", "created_at", "id", "prompt_name", "model", "status", "metadata_map",
        "item", "detail", "trace", "cost_known", "row_version", "is_deleted", "environment",
        "kind",
    ]  # fmt: skip
    assert " AS item, concat('[', " in view
    assert REQUEST_ITEMS.order_by == REQUESTS.order_by == "(project, created_at, id)"
    assert "ReplicatedReplacingMergeTree(" in local and "row_version, is_deleted)" in local
    assert "SETTINGS index_granularity = 128, vertical_merge" in local
    assert distributed.endswith("`request_items_local`, cityHash64(project, id))")
    assert "TO `promptrail`.`request_items_local`\n" in view
    assert view.endswith("FROM `promptrail`.requests_local")
    assert single_view.endswith("FROM `promptrail`.requests")
    # Wide rows are copied in small blocks, and on a cluster shard by shard.
    assert "min_insert_block_size_bytes = 33554432" in backfill
    assert backfill.endswith("parallel_distributed_insert_select = 2")


def test_an_added_materialized_column_is_filled_and_never_inserted() -> None:
    add, fill = render(AddColumn(PROMPT_VERSIONS, "version_json"), "promptrail", "main")

    assert add.startswith(
        "ALTER TABLE `promptrail`.`prompt_versions` ON CLUSTER `main` ADD COLUMN IF NOT EXISTS "
        "version_json String MATERIALIZED toJSONString(("
    )
    assert fill == (
        "ALTER TABLE `promptrail`.`prompt_versions` ON CLUSTER `main` "
        "MATERIALIZE COLUMN `version_json`"
    )
    assert "version_json" not in PROMPT_VERSIONS.inserted_columns()
    # The last inserted column is the one before it (chat prompts' ``chat``).
    assert PROMPT_VERSIONS.inserted_columns()[-1] == "chat"


def test_a_column_added_on_a_cluster_reaches_the_distributed_table_too() -> None:
    add, fill, routed = render(AddColumn(REQUESTS, "environment"), "promptrail", "main")
    (single_add, single_fill) = render(AddColumn(REQUESTS, "environment"), "promptrail", None)

    definition = "environment LowCardinality(String) DEFAULT 'production'"
    # The shards' tables get the column and fill their parts, as before.
    assert add == (
        "ALTER TABLE `promptrail`.`requests_local` ON CLUSTER `main` "
        f"ADD COLUMN IF NOT EXISTS {definition}"
    )
    assert fill == (
        "ALTER TABLE `promptrail`.`requests_local` ON CLUSTER `main` "
        "MATERIALIZE COLUMN `environment`"
    )
    # And the Distributed table the collectors read and insert through, after them (it holds
    # no rows: nothing to fill).
    assert routed == (
        "ALTER TABLE `promptrail`.`requests` ON CLUSTER `main` "
        f"ADD COLUMN IF NOT EXISTS {definition}"
    )
    # A single store's one table, as before.
    assert (
        single_add == f"ALTER TABLE `promptrail`.`requests` ADD COLUMN IF NOT EXISTS {definition}"
    )
    assert single_fill == "ALTER TABLE `promptrail`.`requests` MATERIALIZE COLUMN `environment`"


def test_an_upgraded_cluster_gets_every_column_added_to_its_shards_on_its_distributed_tables() -> (
    None
):
    (repair,) = [m for m in MIGRATIONS if m.name == "routed_columns"]
    earlier = [m for m in MIGRATIONS if m.version < repair.version]
    added = {
        (step.table.name, step.column)
        for m in earlier
        for step in m.objects
        if isinstance(step, AddColumn) and step.table.sharded
    }
    statements = migration_statements(repair, "db", "c")

    # One statement per column added to a sharded table before it (a column some migrations
    # added twice, once), each on the Distributed table with its current definition.
    assert len(statements) == len(added) == 13
    for table, column in added:
        (definition,) = [
            c
            for step in repair.objects
            if isinstance(step, RoutedColumn) and step.table.name == table and step.column == column
            for c in step.table.columns
            if c.split(" ", 1)[0] == column
        ]
        assert (
            f"ALTER TABLE `db`.`{table}` ON CLUSTER `c` ADD COLUMN IF NOT EXISTS {definition}"
            in statements
        )
    # Added by an earlier migration only if missing: a cluster made after those migrations
    # (its Distributed tables copy the shards' columns) is left as it is.
    assert all("IF NOT EXISTS" in s and "_local" not in s for s in statements)
    # A single store (server or embedded) has no Distributed table: nothing to run.
    assert migration_statements(repair, "db", None) == []
    assert migration_statements(repair, "db", None, embedded=True) == []


def test_a_modified_column_takes_its_definition_on_a_single_store_and_on_a_cluster() -> None:
    cluster, routed = render(ModifyColumn(REQUEST_ITEMS, "cost_known"), "promptrail", "main")
    (single,) = render(ModifyColumn(REQUEST_ITEMS, "cost_known"), "promptrail", None)

    (definition,) = [c for c in REQUEST_ITEMS.columns if c.startswith("cost_known ")]
    assert definition.startswith("cost_known Bool DEFAULT JSONExtractBool(detail, ")
    # On a cluster the shards' tables, which the view writes, as every other alteration.
    assert cluster == (
        "ALTER TABLE `promptrail`.`request_items_local` ON CLUSTER `main` "
        f"MODIFY COLUMN {definition}"
    )
    # And the Distributed table in front of them: an insert through it that leaves the column
    # out gets its default there.
    assert routed == (
        f"ALTER TABLE `promptrail`.`request_items` ON CLUSTER `main` MODIFY COLUMN {definition}"
    )
    assert single == f"ALTER TABLE `promptrail`.`request_items` MODIFY COLUMN {definition}"
    # A DEFAULT column is one an insert may give (the view does): no longer computed only.
    assert "cost_known" in REQUEST_ITEMS.inserted_columns()


def test_new_parts_of_the_log_are_compact_below_64_mib_in_new_and_upgraded_stores() -> None:
    (table,) = render(REQUESTS, "promptrail", None)
    (alter,) = render(ModifySetting(REQUESTS, "min_bytes_for_wide_part"), "promptrail", "main")
    (single,) = render(ModifySetting(REQUESTS, "min_bytes_for_wide_part"), "promptrail", None)

    assert "min_bytes_for_wide_part = 67108864" in table
    assert alter == (
        "ALTER TABLE `promptrail`.`requests_local` ON CLUSTER `main` "
        "MODIFY SETTING min_bytes_for_wide_part = 67108864"
    )
    assert single == (
        "ALTER TABLE `promptrail`.`requests` MODIFY SETTING min_bytes_for_wide_part = 67108864"
    )
    # The copy's parts are small and read by key: it keeps ClickHouse's threshold.
    assert not any("min_bytes_for_wide_part" in s for s in REQUEST_ITEMS.settings)


@pytest.mark.parametrize("migration", MIGRATIONS, ids=lambda m: m.name)
def test_every_cluster_statement_is_on_cluster_and_replicated(migration: object) -> None:
    for statement in migration_statements(migration, "db", "c"):  # type: ignore[arg-type]
        if statement.startswith("INSERT"):
            # A backfill is data, not DDL: a sharded one goes through the Distributed table
            # (one of a replicated table, as the scores', runs once and replicates).
            if "_local" in statement or "`requests`" in statement:
                assert "parallel_distributed_insert_select = 2" in statement
            continue
        assert " ON CLUSTER `c`" in statement
        if statement.startswith("ALTER TABLE `db`.`requests") and not any(
            both in statement for both in ("MODIFY COLUMN", "ADD COLUMN")
        ):
            # The shards' tables, not Distributed (a column's definition goes to both).
            assert "_local` ON CLUSTER" in statement
        if statement.startswith("CREATE TABLE"):
            assert "ENGINE = Replicated" in statement or "ENGINE = Distributed" in statement


@pytest.mark.parametrize("database", ["bad-name", "x; DROP TABLE y", "1abc", ""])
def test_database_names_must_be_identifiers(database: str) -> None:
    with pytest.raises(ValueError, match="database"):
        Settings(database=database)
