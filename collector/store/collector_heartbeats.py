"""The collectors sharing one ClickHouse server, as their heartbeats tell (docs/architecture.md,
"Several collectors on one server"): each collector's evaluation worker writes a row every
few seconds, and reads which collectors are alive, to split the rules between them.

``collector_heartbeats``: one row per beat, ``(collector_id, beat_at, leaving)``. Times are
the server's (``now64``), written and compared by ClickHouse itself, so the collectors' own
clocks never meet. A collector is alive while its newest beat is recent and it has not said
it is leaving (a row with ``leaving = 1``, written on a clean stop); it is established once
its first beat is old enough for the others to have seen it. Rows live a day: a collector
running longer counts as established all the same (its oldest row kept is a day old).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, quote

COLLECTOR_HEARTBEATS = Table(
    name="collector_heartbeats",
    columns=(
        "collector_id String",
        "beat_at DateTime64(3, 'UTC')",
        "leaving UInt8",
    ),
    order_by="(collector_id, beat_at)",
    ttl="toDateTime(beat_at) + INTERVAL 1 DAY",
)


@dataclass(frozen=True)
class LiveCollector:
    """A collector whose heartbeat is recent: its id, and whether its first beat is older
    than the join grace (``established``)."""

    collector_id: str
    established: bool


class HeartbeatStore:
    """Write this collector's beats; read the live collectors."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(COLLECTOR_HEARTBEATS.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    def beat(self, collector_id: str, leaving: bool = False) -> None:
        """Record a beat of ``collector_id`` at the server's time (``leaving``: its last)."""
        self._client.command(
            f"INSERT INTO {self._table} (collector_id, beat_at, leaving) "
            "SELECT {c:String}, now64(3), {l:UInt8}",
            parameters={"c": collector_id, "l": int(leaving)},
            settings=self._write,
        )

    def live(self, dead_after_ms: int, grace_ms: int) -> list[LiveCollector]:
        """The collectors with a beat in the last ``dead_after_ms`` and no leaving row, by
        id; established when their first beat is ``grace_ms`` old."""
        result = self._client.query(
            "SELECT collector_id, "
            "min(beat_at) <= now64(3) - toIntervalMillisecond({g:UInt64}) AS established "
            f"FROM {self._table} "
            "GROUP BY collector_id "
            "HAVING max(beat_at) >= now64(3) - toIntervalMillisecond({d:UInt64}) "
            "AND max(leaving) = 0 "
            "ORDER BY collector_id",
            parameters={"g": grace_ms, "d": dead_after_ms},
            settings=self._read,
        )
        return [LiveCollector(str(r[0]), bool(r[1])) for r in result.result_rows]
