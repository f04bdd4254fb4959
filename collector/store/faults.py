"""Stall the request log's writes on purpose, with ClickHouse's own mechanisms.

For tests and the soak benchmark (docs/deploy.md, "When the store stalls"): no fake store, the
real engine refuses or delays the inserts, exactly as it does when merges fall behind.

- ``fail``: ``parts_to_throw_insert = 1`` on the log's table: every insert fails with
  TOO_MANY_PARTS (code 252), the production failure, once the table holds a part.
- ``slow``: ``parts_to_delay_insert = 1`` and a minimum delay: every insert waits ``seconds``
  (ClickHouse's own insert throttling), then succeeds.
- ``gone``: ``DETACH TABLE`` of the log's list table: reads of the log and inserts (its
  materialised view's target is missing) fail with UNKNOWN_TABLE, as a store out of reach.

The settings are the table's own, kept in its metadata (they survive a restart), and a
detached table stays detached: :func:`resume_writes` undoes both. On a ClickHouse cluster run
the same statements on the local tables of each shard.
"""

from __future__ import annotations

import math
from typing import Literal

from clickhouse_connect.driver.client import Client

from .request_tables import REQUEST_ITEMS, REQUESTS
from .schema import quote

StallMode = Literal["fail", "slow", "gone"]

_STALL_SETTINGS = (
    "parts_to_throw_insert",
    "parts_to_delay_insert",
    "min_delay_to_insert_ms",
    "max_delay_to_insert",
)


def _table(database: str, name: str = REQUESTS.name) -> str:
    return f"{quote(database)}.{quote(name)}"


def stall_writes(client: Client, database: str, mode: StallMode, seconds: float = 5.0) -> None:
    """Make inserts into the request log fail (``fail``) or wait ``seconds`` (``slow``), or
    take the log's list table away (``gone``)."""
    if mode == "gone":
        client.command(f"DETACH TABLE {_table(database, REQUEST_ITEMS.name)}")
        return
    if mode == "fail":
        assignments = "parts_to_throw_insert = 1"
    else:
        delay_ms = max(1, round(seconds * 1000))
        assignments = (
            f"parts_to_delay_insert = 1, min_delay_to_insert_ms = {delay_ms}, "
            f"max_delay_to_insert = {max(1, math.ceil(seconds))}"
        )
    client.command(f"ALTER TABLE {_table(database)} MODIFY SETTING {assignments}")


def resume_writes(client: Client, database: str) -> None:
    """Undo :func:`stall_writes`: the list table is back, insert limits are the defaults."""
    client.command(f"ATTACH TABLE IF NOT EXISTS {_table(database, REQUEST_ITEMS.name)}")
    client.command(f"ALTER TABLE {_table(database)} RESET SETTING {', '.join(_STALL_SETTINGS)}")
