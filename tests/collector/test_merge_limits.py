"""Merges of the request log hold bounded memory: few at a time, few parts each."""

from __future__ import annotations

from pathlib import Path

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.store import Store
from tests.collector.engines import run_script
from tests.collector.upgrades import store_before

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


def merge_widths(settings: Settings) -> dict[str, str | None]:
    """The most parts one merge of each table may take, as its definition says."""
    client = open_client(settings.store_url)
    try:
        widths = {}
        for table in TABLES:
            widths[table] = (
                client.query(
                    "SELECT extract(engine_full, 'max_parts_to_merge_at_once = (\\\\d+)') "
                    "FROM system.tables WHERE database = {db:String} AND name = {table:String}",
                    parameters={"db": settings.database, "table": table},
                ).result_rows[0][0]
                or None
            )
        return widths
    finally:
        client.close()


def test_an_upgraded_log_merges_at_most_ten_parts_at_once(settings: Settings) -> None:
    reset = [
        f"ALTER TABLE `{settings.database}`.`{table}` RESET SETTING max_parts_to_merge_at_once"
        for table in TABLES
    ]
    # Migrations 3-8 make the tables from today's definitions: put back the old releases'.
    store_before(settings, 10, [], statements=reset)
    # ClickHouse's own limit (100): a merge at full ingest took 99 parts and ~210 MiB.
    assert merge_widths(settings) == dict.fromkeys(TABLES)

    Store.open(settings.store_url, settings.database).close()  # applies migration 10
    assert merge_widths(settings) == dict.fromkeys(TABLES, "10")
