"""The analytics rollup: the request log summed per hour, sealed hour by hour, exact.

Analytics over a month of a busy log would scan every record with FINAL (~0.5 s at 10M
records). The rollup keeps, per (project, hour, prompt, version, model, status), the sums
analytics need. A materialized view cannot keep those sums exact: a retried copy of a record
or a tombstone reaches it as one more row. So sums are computed the way reads compute them,
with FINAL, but once per hour instead of once per query:

- every insert into ``requests`` (records, retried copies, tombstones) marks the hours it
  touched, with the time, in ``request_touches`` (a view: nothing in the write path changes);
- a sealer sums an hour from ``requests FINAL`` once no insert touched it for a settle time,
  writes the sums tagged with the time the sealing began, then records that time in
  ``request_seals``;
- a read uses an hour's sums only if its seal began more than the settle time after the
  hour's last touch: any insert that touched the hour since started after the sums were read
  (and the settle time covers an insert that started before and committed after). Every
  other hour, and the partial hours at the period's edges, are read from ``requests FINAL``.

A late record, a retry or a delete therefore makes its hour raw until the sealer has summed it
again: reads stay exact at every moment, and only the amount scanned varies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, View, quote

# The percentiles a latency group reports; both sides of a read carry them as aggregate states.
LEVELS = "0.5, 0.95, 0.99"

REQUEST_TOUCHES = Table(
    name="request_touches",
    columns=(
        "project LowCardinality(String)",
        "hour DateTime('UTC')",
        "touched_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("touched_at",),
    order_by="(project, hour)",
    sharded=True,
    sharding_key="cityHash64(project, hour)",
)

# One row per hour an insert block touched: a few rows per batch, written in the same insert.
REQUEST_TOUCHES_MV = View(
    name="request_touches_mv",
    to_table="request_touches",
    select=(
        "SELECT project, toStartOfHour(created_at) AS hour, max(now64(3)) AS touched_at "
        "FROM {db}.requests{local} GROUP BY project, hour"
    ),
    sharded=True,
)

REQUEST_ROLLUP = Table(
    name="request_rollup",
    columns=(
        "project LowCardinality(String)",
        "hour DateTime('UTC')",
        "sealed_at DateTime64(6, 'UTC')",
        "prompt_name String",
        "version UInt32",
        "model LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "records UInt64",
        "cost Float64",
        "tokens UInt64",
        "latency_sum UInt64",
        f"latency_quantiles AggregateFunction(quantiles({LEVELS}), UInt32)",
    ),
    # A re-sealed hour's rows replace the older ones of the same group at merge time; reads
    # pick one seal's rows by sealed_at, so rows of older seals are never counted either way.
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, hour, prompt_name, model, status, version)",
)

REQUEST_SEALS = Table(
    name="request_seals",
    columns=(
        "project LowCardinality(String)",
        "hour DateTime('UTC')",
        "sealed_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, hour)",
)

_SEALED_COLUMNS = (
    "project",
    "hour",
    "sealed_at",
    "prompt_name",
    "version",
    "model",
    "status",
    "records",
    "cost",
    "tokens",
    "latency_sum",
    "latency_quantiles",
)

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class HourState:
    """An hour of a project's log that holds records: when last touched, when last sealed."""

    hour: datetime
    touched_at: datetime
    sealed_at: datetime | None


class RollupStore:
    """The rollup's tables: marks of touched hours, sums and seals."""

    def __init__(self, client: Client, database: str, requests_table: str) -> None:
        self._client = client
        self._database = database
        self._requests = requests_table
        self.touches = f"{quote(database)}.{quote(REQUEST_TOUCHES.name)}"
        self.table = f"{quote(database)}.{quote(REQUEST_ROLLUP.name)}"
        self.seals = f"{quote(database)}.{quote(REQUEST_SEALS.name)}"

    def hours(self, project: str, first: datetime, last: datetime) -> list[HourState]:
        """Return the touched hours of a project from ``first`` to ``last`` (hour starts)."""
        rows = self._client.query(
            "SELECT t.hour, t.touched, s.sealed FROM "
            f"(SELECT hour, max(touched_at) AS touched FROM {self.touches} "
            "WHERE project = {project:String} AND hour >= {first:DateTime('UTC')} "
            "AND hour <= {last:DateTime('UTC')} GROUP BY hour) AS t "
            f"LEFT JOIN (SELECT hour, max(sealed_at) AS sealed FROM {self.seals} "
            "WHERE project = {project:String} AND hour >= {first:DateTime('UTC')} "
            "AND hour <= {last:DateTime('UTC')} GROUP BY hour) AS s ON t.hour = s.hour "
            "ORDER BY t.hour",
            parameters={"project": project, "first": first, "last": last},
            settings={"join_use_nulls": 1},
        ).result_rows
        return [
            HourState(_utc(hour), _utc(touched), None if sealed is None else _utc(sealed))
            for hour, touched, sealed in rows
        ]

    def due(self, settle: timedelta, limit: int) -> list[tuple[str, datetime]]:
        """Return (project, hour) pairs to seal: untouched for ``settle``, not validly sealed."""
        rows = self._client.query(
            "SELECT t.project, t.hour FROM "
            f"(SELECT project, hour, max(touched_at) AS touched FROM {self.touches} "
            "GROUP BY project, hour) AS t "
            f"LEFT JOIN (SELECT project, hour, max(sealed_at) AS sealed FROM {self.seals} "
            "GROUP BY project, hour) AS s ON t.project = s.project AND t.hour = s.hour "
            "WHERE t.touched < now64(3) - toIntervalMillisecond({settle:UInt64}) "
            "AND (s.sealed IS NULL "
            "OR s.sealed <= t.touched + toIntervalMillisecond({settle:UInt64})) "
            "ORDER BY t.project, t.hour LIMIT {limit:UInt32}",
            parameters={"settle": _millis(settle), "limit": limit},
            settings={"join_use_nulls": 1},
        ).result_rows
        return [(str(project), _utc(hour)) for project, hour in rows]

    def seal(self, project: str, hours: Sequence[datetime]) -> datetime:
        """Sum ``hours`` of a project from the log as it is now; return the seal's time.

        The time is taken from ClickHouse's clock (the one touches are stamped with) before
        the log is read. The sums are written before the seals that make them readable.
        """
        (sealed_at,) = self._client.query("SELECT now64(6)").result_rows[0]
        sealed_at = _utc(sealed_at)
        ordered = sorted(hours)
        params: dict[str, Any] = {
            "project": project,
            "sealed_at": sealed_at,
            "lo": ordered[0],
            "hi": ordered[-1] + HOUR,
            "hours": ordered,
        }
        self._client.command(
            f"INSERT INTO {self.table} ({', '.join(_SEALED_COLUMNS)}) "
            "SELECT project, toStartOfHour(created_at) AS h, "
            "{sealed_at:DateTime64(6, 'UTC')}, prompt_name, version, model, status, count(), "
            f"sum(estimated_cost_usd), sum(total_tokens), sum(latency_ms), "
            f"quantilesState({LEVELS})(latency_ms) "
            f"FROM {self._requests} FINAL WHERE project = {{project:String}} "
            "AND created_at >= {lo:DateTime64(3, 'UTC')} "
            "AND created_at < {hi:DateTime64(3, 'UTC')} "
            "AND h IN {hours:Array(DateTime('UTC'))} "
            "GROUP BY project, h, prompt_name, version, model, status",
            parameters=params,
        )
        self._client.insert(
            REQUEST_SEALS.name,
            [[project, hour, sealed_at] for hour in ordered],
            column_names=["project", "hour", "sealed_at"],
            column_type_names=REQUEST_SEALS.column_types(["project", "hour", "sealed_at"]),
            database=self._database,
        )
        return sealed_at


def _millis(span: timedelta) -> int:
    return max(0, round(span.total_seconds() * 1000))


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
