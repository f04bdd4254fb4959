"""Merges of the request log hold bounded memory: few at a time, few parts, small reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from tests.collector.engines import run_script
from tests.collector.upgrades import assert_stored_whole, encoded, store_before, wide_rows

# The tables every logged record is written to.
TABLES = ("requests", "request_items", "request_metadata")

# Loads the engine through the collector's own connection and prints its merge slots.
_MERGE_SLOTS = """
import sys
from promptrail.collector.store.connection import open_client
client = open_client("chdb://" + sys.argv[1])
client.command("CREATE TABLE slots (x UInt8) ENGINE = MergeTree ORDER BY x")
print(client.query(
    "SELECT value FROM system.metrics WHERE metric = 'BackgroundMergesAndMutationsPoolSize'"
).result_rows[0][0])
"""


def test_the_embedded_engine_runs_two_merges_at_a_time(tmp_path: Path) -> None:
    # Left to itself the engine runs four on this machine (its pool of 2, ratio 2).
    assert run_script(_MERGE_SLOTS, str(tmp_path / "clickhouse")) == "2"


def table_setting(settings: Settings, name: str) -> dict[str, str | None]:
    """The value of storage setting ``name`` in each table's definition (None: unset)."""
    client = open_client(settings.store_url)
    try:
        values = {}
        for table in TABLES:
            values[table] = (
                client.query(
                    "SELECT extract(engine_full, {pattern:String}) "
                    "FROM system.tables WHERE database = {db:String} AND name = {table:String}",
                    parameters={
                        "pattern": f"\\b{name} = (\\d+)",
                        "db": settings.database,
                        "table": table,
                    },
                ).result_rows[0][0]
                or None
            )
        return values
    finally:
        client.close()


def reset(settings: Settings, name: str, tables: Sequence[str] = TABLES) -> list[str]:
    """Statements that take setting ``name`` out of those tables' definitions."""
    return [f"ALTER TABLE `{settings.database}`.`{table}` RESET SETTING {name}" for table in tables]


def test_an_upgraded_log_merges_at_most_ten_parts_at_once(settings: Settings) -> None:
    width = "max_parts_to_merge_at_once"
    # Migrations 3-8 make the tables from today's definitions: put back the old releases'.
    store_before(settings, 10, [], statements=reset(settings, width))
    # ClickHouse's own limit (100): a merge at full ingest took 99 parts and ~210 MiB.
    assert table_setting(settings, width) == dict.fromkeys(TABLES)

    Store.open(settings.store_url, settings.database).close()  # applies migration 10
    assert table_setting(settings, width) == dict.fromkeys(TABLES, "10")


def test_an_upgraded_store_merges_every_table_of_the_log_column_by_column(
    settings: Settings,
) -> None:
    columns = "vertical_merge_algorithm_min_columns_to_activate"
    rows = "vertical_merge_algorithm_min_rows_to_activate"
    copies = ["request_items", "request_metadata"]
    store_before(
        settings,
        11,
        [],
        statements=reset(settings, columns, copies) + reset(settings, rows, copies[1:]),
    )
    # ClickHouse's defaults: column by column only with 11 columns to gather, which the
    # copies never have, so their merges read every column of every part at once. (The log
    # itself has more.)
    assert [table_setting(settings, columns)[table] for table in copies] == [None, None]
    assert table_setting(settings, rows)["request_metadata"] is None

    Store.open(settings.store_url, settings.database).close()  # applies migration 11
    assert table_setting(settings, columns) == dict.fromkeys(TABLES, "1")
    assert table_setting(settings, rows) == dict.fromkeys(TABLES, "8192")


def test_new_parts_of_the_log_hold_granules_of_at_most_two_mib(settings: Settings) -> None:
    # ~10 KB stored per record (output and its search text): 2 MiB is ~200 of them, where
    # ClickHouse's 10 MiB granules would take ~1,000 (here all 1,200, or 600).
    rows = wide_rows("g", 1_200, 5_000)
    store = Store.open(settings.store_url, settings.database)
    try:
        store.requests.insert([encoded(rows)])
        ((parts, records, marks),) = store.client.query(
            "SELECT count(), sum(rows), sum(marks) FROM system.parts WHERE active "
            "AND database = {db:String} AND table = 'requests'",
            parameters={"db": settings.database},
        ).result_rows
        assert (parts, records) == (1, 1_200)
        granules = marks - 1  # the last mark closes the part
        assert records / granules < 300
        assert_stored_whole(store, rows)
    finally:
        store.close()
