"""The analytics rollup: the request log summed per hour and per day, sealed, exact.

Analytics over a month of a busy log would scan every record with FINAL. The rollup keeps, per
(project, hour or day, prompt, version, model, status), the sums analytics need; a month reads
~30 days of sums, not ~720 hours of them.

A materialized view cannot keep those sums exact: a retried copy of a record or a tombstone
reaches it as one more row. So sums are computed the way reads compute them, with FINAL, but
once per bucket instead of once per query:

- every insert into ``requests`` (records, retried copies, tombstones) marks the hours it
  touched, with the time, in ``request_touches`` (a view: nothing in the write path changes);
- a sealer sums a bucket (an hour, or a day) from ``requests FINAL`` once no insert touched it
  for a settle time, writes the sums tagged with the time the sealing began, then records that
  time in ``request_seals``;
- a read uses a bucket's sums only if its seal began more than the settle time after the
  bucket's last touch: any insert that touched it since started after the sums were read (and
  the settle time covers an insert that started before and committed after). Every other
  hour, and the partial hours at the period's edges, are read from ``requests FINAL``.

A late record, a retry or a delete therefore makes its day and hour raw until the sealer has
summed them again: reads stay exact at every moment, and only the amount scanned varies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import RESERVED_PREFIX
from .schema import Table, View, quote

# The percentiles a latency group reports; both sides of a read carry them as aggregate states
# of quantilesBFloat16: counts per latency cut to 8 significant bits (a percentile is the exact
# one or up to 0.78% below it: docs/api-notes.md, "Analytics"), deterministic, and merged an
# order of magnitude faster than the sampling ``quantiles``.
LEVELS = "0.5, 0.95, 0.99"

Span = Literal["hour", "day"]

# How long each span is, and the function giving the bucket a time falls in.
SPANS: dict[Span, tuple[timedelta, str]] = {
    "hour": (timedelta(hours=1), "toStartOfHour"),
    "day": (timedelta(days=1), "toStartOfDay"),
}

_SPAN_TYPE = "Enum8('hour' = 1, 'day' = 2)"

# The records the rollup sums: the model calls, what analytics report unless a filter names
# other kinds (docs/api-notes.md, "Traces, sessions and users"; such a query reads the log
# throughout). Stores sealed before
# migration 19 summed every record: that migration marks every hour touched, to be summed anew.
# And only the environments a view shows by default (docs/api-notes.md, Environments): every
# one but the service's own, whose records a query naming environments reads from the log.
# The records stored before environments read ``production``, so no hour needs summing anew.
MODEL_CALLS = f"kind IN ('llm', 'embedding') AND NOT startsWith(environment, '{RESERVED_PREFIX}')"

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

# What a rollup row keeps of its records: each column, and the aggregate over the log's rows
# that fills it when a bucket is sealed.
_SUMS = (
    ("records UInt64", "count()"),
    ("cost Float64", "sum(estimated_cost_usd)"),
    ("tokens UInt64", "sum(total_tokens)"),
    ("latency_sum UInt64", "sum(latency_ms)"),
    (
        f"latency_quantiles AggregateFunction(quantilesBFloat16({LEVELS}), UInt32)",
        f"quantilesBFloat16State({LEVELS})(latency_ms)",
    ),
    # The records without a known price (migration 47): analytics of the cost count them
    # from the sums as they do the records, not with a query of the log's whole period. NULL
    # in the rows sealed before (or by a collector of an older release): a query reading one
    # counts them in the log instead.
    ("unpriced Nullable(UInt64) DEFAULT NULL", "countIf(NOT cost_known)"),
)
_SUM_COLUMNS = tuple(column for column, _ in _SUMS)
_SUMMED = ", ".join(aggregate for _, aggregate in _SUMS)

REQUEST_ROLLUP = Table(
    name="request_rollup",
    columns=(
        "project LowCardinality(String)",
        f"span {_SPAN_TYPE}",
        "bucket DateTime('UTC')",
        "sealed_at DateTime64(6, 'UTC')",
        "prompt_name LowCardinality(String)",
        "version UInt32",
        "model LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        *_SUM_COLUMNS,
    ),
    # A re-sealed bucket's rows replace the older ones of the same group at merge time; reads
    # pick one seal's rows by sealed_at, so rows of older seals are never counted either way.
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, span, bucket, prompt_name, model, status, version)",
)

# The same rows with a prompt's together (migration 41): what a query naming one prompt reads.
# In ``request_rollup`` a day's rows of every prompt lie side by side (~27 per prompt, 5,500 a
# day at 10M records and 200 prompts), so granules of 8,192 rows never leave a prompt out: a
# month of one prompt decoded the latency states of 26 granules (~200,000 rows) to merge ~800,
# most of that query's time. Here a prompt's buckets are one range, in granules of 256 rows (4
# granules a part there). A view copies every insert into ``request_rollup`` (a seal by any
# collector, of any version) in the same insert, so this table holds a seal's rows before the
# seal is written; rows of the view and of the migration's copy may meet twice, and reads take
# such a pair once.
REQUEST_ROLLUP_BY_PROMPT = Table(
    name="request_rollup_by_prompt",
    columns=REQUEST_ROLLUP.columns,
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, span, prompt_name, bucket, model, status, version)",
    settings=("index_granularity = 256",),
)

REQUEST_ROLLUP_BY_PROMPT_MV = View(
    name="request_rollup_by_prompt_mv",
    to_table=REQUEST_ROLLUP_BY_PROMPT.name,
    select=(
        f"SELECT {', '.join(REQUEST_ROLLUP.inserted_columns())} FROM {{db}}.{REQUEST_ROLLUP.name}"
    ),
)

# The columns that name one row of a seal (the rollup's key, and the seal).
ROW_KEY = "project, span, bucket, sealed_at, prompt_name, model, status, version"

# Per day and metadata pair: what ``group_by=metadata.<key>`` reads for whole sealed days. A
# key found in the days sealed together gets a row per value, and one for the value "" that
# sums the records without the key (or with it empty), as a read of the log groups them. A
# sealed day without rows for a key has no record carrying it: its whole day is the "" group.
REQUEST_ROLLUP_METADATA = Table(
    name="request_rollup_metadata",
    columns=(
        "project LowCardinality(String)",
        "bucket DateTime('UTC')",
        "sealed_at DateTime64(6, 'UTC')",
        "key LowCardinality(String)",
        "value String",
        "errors UInt64",
        *_SUM_COLUMNS,
    ),
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, key, bucket, value)",
)

REQUEST_SEALS = Table(
    name="request_seals",
    columns=(
        "project LowCardinality(String)",
        f"span {_SPAN_TYPE}",
        "bucket DateTime('UTC')",
        "sealed_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("sealed_at",),
    order_by="(project, span, bucket)",
)


@dataclass(frozen=True)
class BucketState:
    """An hour or day of a project's log that holds records: last touched, last sealed."""

    bucket: datetime
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
        self.by_prompt = f"{quote(database)}.{quote(REQUEST_ROLLUP_BY_PROMPT.name)}"
        self.seals = f"{quote(database)}.{quote(REQUEST_SEALS.name)}"
        self.metadata = f"{quote(database)}.{quote(REQUEST_ROLLUP_METADATA.name)}"

    def states(
        self, project: str, first: datetime, last: datetime
    ) -> dict[Span, list[BucketState]]:
        """Return the touched hours and days of a project from ``first`` to ``last`` (hours).

        One query reads both small tables; the touches of a day are those of its hours. Each
        keeps the newest row of its key (an hour's last touch, a bucket's last seal) as its
        version: FINAL reads those, a little cheaper than grouping (on a cluster an hour's
        touches lie on one shard, by the sharding key).
        """
        rows = self._client.query(
            "SELECT 'touch', hour, toDateTime64(touched_at, 6) "
            f"FROM {self.touches} FINAL WHERE project = {{project:String}} "
            "AND hour >= {first:DateTime('UTC')} AND hour <= {last:DateTime('UTC')} "
            "UNION ALL "
            f"SELECT toString(span), bucket, sealed_at FROM {self.seals} FINAL "
            "WHERE project = {project:String} AND bucket >= {first_day:DateTime('UTC')} "
            "AND bucket <= {last:DateTime('UTC')}",
            parameters={
                "project": project,
                "first": first,
                "first_day": first.replace(hour=0),
                "last": last,
            },
            # As analytics' own query (analytics.UNCOMPILED): no JIT for a small query.
            settings={"compile_expressions": 0, "compile_aggregate_expressions": 0},
        ).result_rows
        touched: dict[Span, dict[datetime, datetime]] = {"hour": {}, "day": {}}
        sealed: dict[Span, dict[datetime, datetime]] = {"hour": {}, "day": {}}
        for kind, bucket, at in rows:
            bucket, at = utc(bucket), utc(at)
            if kind == "touch":
                touched["hour"][bucket] = at
                day = bucket.replace(hour=0)
                touched["day"][day] = max(at, touched["day"].get(day, at))
            else:
                sealed["hour" if kind == "hour" else "day"][bucket] = at
        return {
            span: [
                BucketState(bucket, at, sealed[span].get(bucket))
                for bucket, at in sorted(touched[span].items())
            ]
            for span in SPANS
        }

    def due(self, span: Span, settle: timedelta, limit: int) -> list[tuple[str, datetime]]:
        """Return (project, bucket) pairs to seal: untouched for ``settle``, not validly sealed."""
        rows = self._client.query(
            "SELECT t.project, t.bucket FROM "
            f"(SELECT project, {SPANS[span][1]}(hour) AS bucket, max(touched_at) AS touched "
            f"FROM {self.touches} GROUP BY project, bucket) AS t "
            f"LEFT JOIN (SELECT project, bucket, max(sealed_at) AS sealed FROM {self.seals} "
            "WHERE span = {span:String} GROUP BY project, bucket) AS s "
            "ON t.project = s.project AND t.bucket = s.bucket "
            "WHERE t.touched < now64(3) - toIntervalMillisecond({settle:UInt64}) "
            "AND (s.sealed IS NULL "
            "OR s.sealed <= t.touched + toIntervalMillisecond({settle:UInt64})) "
            "ORDER BY t.project, t.bucket LIMIT {limit:UInt32}",
            parameters={"span": span, "settle": _millis(settle), "limit": limit},
            settings={"join_use_nulls": 1},
        ).result_rows
        return [(str(project), utc(bucket)) for project, bucket in rows]

    def seal(self, project: str, span: Span, buckets: Sequence[datetime]) -> datetime:
        """Sum ``buckets`` of a project from the log as it is now; return the seal's time.

        The time is taken from ClickHouse's clock (the one touches are stamped with) before
        the log is read. The sums are written before the seals that make them readable.
        """
        (sealed_at,) = self._client.query("SELECT now64(6)").result_rows[0]
        sealed_at = utc(sealed_at)
        ordered = sorted(buckets)
        length, start_of = SPANS[span]
        params: dict[str, Any] = {
            "project": project,
            "span": span,
            "sealed_at": sealed_at,
            "lo": ordered[0],
            "hi": ordered[-1] + length,
            "buckets": ordered,
        }
        self._client.command(
            f"INSERT INTO {self.table} ({', '.join(REQUEST_ROLLUP.inserted_columns())}) "
            f"SELECT project, {{span:String}}, {start_of}(created_at) AS b, "
            "{sealed_at:DateTime64(6, 'UTC')}, prompt_name, version, model, status, "
            f"{_SUMMED} "
            f"FROM {self._requests} FINAL WHERE project = {{project:String}} "
            "AND created_at >= {lo:DateTime64(3, 'UTC')} "
            "AND created_at < {hi:DateTime64(3, 'UTC')} "
            f"AND b IN {{buckets:Array(DateTime('UTC'))}} AND {MODEL_CALLS} "
            "GROUP BY project, b, prompt_name, version, model, status",
            parameters=params,
        )
        if span == "day":
            self._seal_metadata(params)
        seal_columns = REQUEST_SEALS.inserted_columns()
        self._client.insert(
            REQUEST_SEALS.name,
            [[project, span, bucket, sealed_at] for bucket in ordered],
            column_names=seal_columns,
            column_type_names=REQUEST_SEALS.column_types(seal_columns),
            database=self._database,
        )
        return sealed_at

    def _seal_metadata(self, params: dict[str, Any]) -> None:
        # Every record is counted once under each key of the days (its value, or ""): the
        # keys are those any record of these days carries, tombstoned or not.
        in_days = (
            "project = {project:String} AND created_at >= {lo:DateTime64(3, 'UTC')} "
            "AND created_at < {hi:DateTime64(3, 'UTC')} "
            "AND toStartOfDay(created_at) IN {buckets:Array(DateTime('UTC'))}"
        )
        self._client.command(
            f"INSERT INTO {self.metadata} "
            f"({', '.join(REQUEST_ROLLUP_METADATA.inserted_columns())}) "
            "SELECT project, toStartOfDay(created_at) AS b, {sealed_at:DateTime64(6, 'UTC')}, "
            f"k, metadata_map[k] AS v, countIf(status = 'error'), {_SUMMED} "
            f"FROM {self._requests} FINAL "
            f"ARRAY JOIN (SELECT groupUniqArrayArray(mapKeys(metadata_map)) "
            f"FROM {self._requests} WHERE {in_days}) AS k "
            f"WHERE {in_days} AND {MODEL_CALLS} GROUP BY project, b, k, v",
            parameters=params,
        )


def _millis(span: timedelta) -> int:
    return max(0, round(span.total_seconds() * 1000))
