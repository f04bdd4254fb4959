"""Aggregations over the request log, computed inside ClickHouse.

A query reads two sources and adds them up: the rollup's sums for the hours a plan says are
sealed (see :mod:`.rollups`), and the log itself, with FINAL, for the rest of the period. Both
sides give the same partial sums (records, cost, tokens, latency, errors, the records without
a known price, and the latency percentiles as an aggregate state), so the outer query computes
every metric from the sums of either or both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .request_filters import RequestFilter, filter_where
from .requests import RequestStore
from .rollups import LEVELS, ROW_KEY, RollupStore, Span
from .score_sql import sibling, span_ids, span_records
from .score_tables import SCORE_SUMS

# Each metric from the partial sums of _RAW_SUMS / _ROLLUP_SUMS it needs (_NEEDS).
METRICS = {
    "cost": "sum(part_cost)",
    "usage": "sum(part_tokens)",
    "latency": "sum(part_latency) / sum(part_records)",
    "errors": "sum(part_errors)",
}

# Group expressions over a time column: the log's created_at or the rollup's bucket (a day
# bucket is never planned for a query grouping by hour).
GROUPS = {
    "prompt_name": "prompt_name",
    "model": "model",
    "status": "toString(status)",
    "version": "toString(version)",
    "day": "formatDateTime(toStartOfDay({time}), '%Y-%m-%d')",
    "hour": "formatDateTime(toStartOfHour({time}), '%Y-%m-%dT%H:00:00Z')",
}

# Each partial sum over the log, the rollup and the metadata rollup. (Named apart from the
# rollup's columns: an alias equal to a column would shadow it.) ``uncounted``: rows sealed
# before the rollup counted the records without a price (NULL there, migration 47).
_RAW_SUMS = {
    "records": "count()",
    "cost": "sum(estimated_cost_usd)",
    "tokens": "sum(total_tokens)",
    "latency": "sum(latency_ms)",
    "errors": "countIf(status = 'error')",
    "unpriced": "countIf(NOT cost_known)",
    "uncounted": "toUInt64(0)",
}
_ROLLUP_SUMS = {
    "records": "sum(records)",
    "cost": "sum(cost)",
    "tokens": "sum(tokens)",
    "latency": "sum(latency_sum)",
    "errors": "sumIf(records, status = 'error')",
    "unpriced": "sum(unpriced)",
    "uncounted": "countIf(isNull(unpriced))",
}
_METADATA_SUMS = {**_ROLLUP_SUMS, "errors": "sum(errors)"}

# The partial sums each metric reads (a part computes only those: fewer columns read and
# summed). The cost's come with the count of records without a price.
_NEEDS = {
    "cost": ("records", "cost", "unpriced", "uncounted"),
    "usage": ("records", "tokens"),
    "latency": ("records", "latency"),
    "errors": ("records", "errors"),
}

# The parts group days and hours by their start, and the outer query names each group once:
# a sealed month is ~66,000-160,000 rollup rows to name one by one.
_TIME_GROUPS = {"day": "toStartOfDay({time})", "hour": "toStartOfHour({time})"}
_TIME_NAMES = {
    "day": "formatDateTime(part_name, '%Y-%m-%d')",
    "hour": "formatDateTime(part_name, '%Y-%m-%dT%H:00:00Z')",
}

_MAX_GROUPS = 1000

# No JIT compilation for these small queries: ClickHouse compiles an expression on its third
# use, and that query took 60-90 ms where the others took ~30 (docs/scale.md, "Analytics cost
# by day"), for no gain measurable after.
UNCOMPILED = {"compile_expressions": 0, "compile_aggregate_expressions": 0}


# Ranges of buckets of each span.
_Spans = dict[Span, list[tuple[datetime, datetime]]]


@dataclass(frozen=True)
class Plan:
    """Where a query reads each part of its period: ``[start, end)`` ranges.

    ``days`` and ``hours`` are whole sealed days and hours read from the rollup, ``raw``
    ranges are read from the log. Together they cover every record of the period once.
    """

    days: list[tuple[datetime, datetime]] = field(default_factory=list)
    hours: list[tuple[datetime, datetime]] = field(default_factory=list)
    raw: list[tuple[datetime, datetime]] = field(default_factory=list)


@dataclass(frozen=True)
class _Query:
    """One aggregation: what each part of it reads, and the parameters they collect."""

    project: str
    group_by: str | None
    filters: RequestFilter
    percentiles: bool
    params: dict[str, Any]
    # The partial sums each part computes (_NEEDS).
    needs: tuple[str, ...]

    def sums(self, source: dict[str, str]) -> str:
        """The partial sums this query needs, as ``source`` computes them."""
        return ", ".join(f"{source[need]} AS part_{need}" for need in self.needs)

    def name(self, time: str) -> str:
        """The group expression of a part over ``time`` (days and hours by their start)."""
        if self.group_by is None:
            return "''"
        if self.group_by in _TIME_GROUPS:
            return _TIME_GROUPS[self.group_by].format(time=time)
        return GROUPS[self.group_by].format(time=time)


@dataclass(frozen=True)
class GroupRow:
    """One group: name, metric value, record count, latency percentiles when asked, and how
    many of its records have no known price (counted as 0 in a cost; None when rows sealed
    before the rollup counted them were read)."""

    name: str
    value: float
    count: int
    percentiles: tuple[float, float, float] | None
    unpriced: int | None = 0


class AnalyticsStore:
    """Runs analytics queries on the request log and its rollup."""

    def __init__(self, client: Client, requests: RequestStore, rollups: RollupStore) -> None:
        self._client = client
        self._requests = requests
        self._rollups = rollups

    def scores(
        self, project: str, score_name: str, group_by: str | None, filters: RequestFilter
    ) -> tuple[GroupRow, list[GroupRow]]:
        """``metric=score``: the mean of a score name's scores on the matching records."""
        return score_aggregate(self._client, self._requests, project, score_name, group_by, filters)

    def aggregate(
        self,
        project: str,
        metric: str,
        group_by: str | None,
        filters: RequestFilter,
        plan: Plan,
        percentiles: bool,
    ) -> tuple[GroupRow, list[GroupRow]]:
        """Return the metric over all matching records, and per group largest first, each
        with its count of records without a known price.

        One query gives both: ``GROUPING SETS ((name), ())`` adds the total as one more row.
        """
        needs = _NEEDS[metric]
        query = _Query(project, group_by, filters, percentiles, {"limit": _MAX_GROUPS + 1}, needs)
        parts = []
        if plan.raw:
            parts.append(self._raw_part(query, plan.raw))
        if plan.days and (group_by or "").startswith("metadata."):
            parts.extend(self._metadata_parts(query, plan.days))
        elif filters.prompt_name is not None:
            # One prompt's copy is read a span at a time, each a range of its key.
            by_span: tuple[tuple[Span, list[tuple[datetime, datetime]]], ...] = (
                ("day", plan.days),
                ("hour", plan.hours),
            )
            parts.extend(
                self._rollup_part(query, {span: ranges}) for span, ranges in by_span if ranges
            )
        elif plan.days or plan.hours:
            # Sealed days and hours in one read of the rollup: each part of a query costs
            # some 5-10 ms of CPU whatever it reads (docs/scale.md, "Analytics cost by day").
            parts.append(self._rollup_part(query, {"day": plan.days, "hour": plan.hours}))
        if not parts:
            return GroupRow("", 0.0, 0, (0.0, 0.0, 0.0) if percentiles else None), []
        state = f", quantilesBFloat16Merge({LEVELS})(part_q)" if percentiles else ""
        union = " UNION ALL ".join(f"({part})" for part in parts)
        unpriced = (
            "if(sum(part_uncounted) > 0, NULL, sum(part_unpriced))" if "unpriced" in needs else "0"
        )
        name = _TIME_NAMES.get(group_by or "", "part_name")
        rows = self._client.query(
            f"SELECT {name} AS name, {METRICS[metric]} AS value, sum(part_records), "
            f"{unpriced}{state}, grouping(part_name) AS is_total FROM ({union}) "
            f"GROUP BY GROUPING SETS ((part_name), ()) "
            "ORDER BY is_total DESC, value DESC, name LIMIT {limit:UInt32}",
            parameters=query.params,
            settings=UNCOMPILED,
        ).result_rows
        found = [
            GroupRow(
                name=str(r[0]),
                value=_number(r[1]),
                count=int(r[2]),
                percentiles=_levels(r[4]) if percentiles else None,
                unpriced=None if r[3] is None else int(r[3]),
            )
            for r in rows
        ]
        return found[0], found[1:] if group_by is not None else []

    def count_unpriced(self, project: str, filters: RequestFilter) -> int:
        """Return how many live records matching ``filters`` have no known price.

        What :meth:`aggregate` says when it read rows sealed before the rollup kept the
        count (migration 47). This reads the log, only the rows whose cost is unknown (a
        record's copies and tombstone carry the same flag), and resolves each record's copies
        by key as list pages do, without FINAL.
        """
        where, params = filter_where(project, filters)
        rows = self._client.query(
            "SELECT count() FROM (SELECT max(is_deleted) AS gone "
            f"FROM {self._requests.table} WHERE {where} AND NOT cost_known "
            "GROUP BY created_at, id) WHERE gone = 0",
            parameters=params,
            settings=UNCOMPILED,
        ).result_rows
        return int(rows[0][0])

    def _raw_part(self, query: _Query, ranges: list[tuple[datetime, datetime]]) -> str:
        params, group_by = query.params, query.group_by
        untimed = replace(query.filters, start=None, end=None)
        where, raw_params = filter_where(query.project, untimed)
        params.update(raw_params)
        name = query.name("created_at") if group_by in _TIME_GROUPS else log_group(group_by, params)
        state = (
            f", quantilesBFloat16State({LEVELS})(latency_ms) AS part_q" if query.percentiles else ""
        )
        return (
            f"SELECT {name} AS part_name, {query.sums(_RAW_SUMS)}"
            f"{state} FROM {self._requests.table} FINAL "
            f"WHERE {where} AND ({_ranges('created_at', 'raw', params, ranges)}) "
            "GROUP BY part_name"
        )

    def _rollup_part(self, query: _Query, spans: _Spans) -> str:
        params, group_by = query.params, query.group_by
        # Only filters and groups the rollup keeps are ever planned onto it.
        assert not query.filters.metadata and not (group_by or "").startswith("metadata.")
        clauses = [self._newest_seals(query, spans)]
        for column in ("prompt_name", "model", "status"):
            value = getattr(query.filters, column)
            if value is not None:
                clauses.append(f"{column} = {{{column}:String}}")
                params[column] = value
        state = (
            f", quantilesBFloat16MergeState({LEVELS})(latency_quantiles) AS part_q"
            if query.percentiles
            else ""
        )
        source = f"{self._rollups.table} WHERE {' AND '.join(clauses)}"
        if query.filters.prompt_name is not None:
            # One prompt's rows lie together in this copy (rollups.REQUEST_ROLLUP_BY_PROMPT);
            # a row both its view and the migration's copy wrote is read once.
            source = (
                f"(SELECT * FROM {self._rollups.by_prompt} WHERE {' AND '.join(clauses)} "
                f"LIMIT 1 BY {ROW_KEY})"
            )
        return (
            f"SELECT {query.name('bucket')} AS part_name, {query.sums(_ROLLUP_SUMS)}{state} "
            f"FROM {source} GROUP BY part_name"
        )

    def _metadata_parts(self, query: _Query, ranges: list[tuple[datetime, datetime]]) -> list[str]:
        """Sealed whole days grouped by a metadata key: the key's rows, or the whole day."""
        assert query.group_by is not None
        query.params["group_key"] = query.group_by.removeprefix("metadata.")
        newest = self._newest_seals(query, {"day": ranges}, spanned=False)
        state = (
            f", quantilesBFloat16MergeState({LEVELS})(latency_quantiles) AS part_q"
            if query.percentiles
            else ""
        )
        with_key = (
            f"SELECT bucket, sealed_at FROM {self._rollups.metadata} "
            "WHERE project = {project:String} AND key = {group_key:String}"
        )
        return [
            f"SELECT value AS part_name, {query.sums(_METADATA_SUMS)}{state} "
            f"FROM {self._rollups.metadata} "
            f"WHERE project = {{project:String}} AND key = {{group_key:String}} AND {newest} "
            "GROUP BY part_name",
            f"SELECT '' AS part_name, {query.sums(_ROLLUP_SUMS)}{state} FROM {self._rollups.table} "
            f"WHERE span = {{span_day:String}} AND {newest} "
            f"AND (bucket, sealed_at) NOT IN ({with_key}) GROUP BY part_name",
        ]

    def _newest_seals(self, query: _Query, spans: _Spans, spanned: bool = True) -> str:
        """The condition for a rollup table's rows of the newest seals of ``spans``' buckets
        (each span's ranges of buckets); ``spanned``: whether the table has a ``span`` column
        (``request_rollup_metadata`` keeps days alone).

        A sealer that re-sealed a bucket since the plan was made wrote its rows before its
        seal, and they sum the same records.
        """
        query.params["project"] = query.project
        buckets = []
        for span, ranges in spans.items():
            if ranges:
                query.params[f"span_{span}"] = span
                within = _ranges("bucket", span, query.params, ranges, "DateTime('UTC')")
                buckets.append(f"(span = {{span_{span}:String}} AND ({within}))")
        where = f"project = {{project:String}} AND ({' OR '.join(buckets)})"
        if not spanned:
            ((span, ranges),) = spans.items()
            within = _ranges("bucket", span, query.params, ranges, "DateTime('UTC')")
            return (
                f"project = {{project:String}} AND ({within}) AND (bucket, sealed_at) IN "
                f"(SELECT bucket, max(sealed_at) FROM {self._rollups.seals} WHERE {where} "
                "GROUP BY bucket)"
            )
        return (
            f"{where} AND (span, bucket, sealed_at) IN "
            f"(SELECT span, bucket, max(sealed_at) FROM {self._rollups.seals} WHERE {where} "
            "GROUP BY span, bucket)"
        )


def _ranges(
    column: str,
    prefix: str,
    params: dict[str, Any],
    ranges: list[tuple[datetime, datetime]],
    kind: str = "DateTime64(3, 'UTC')",
) -> str:
    """``column`` within any of ``ranges``, compared as ``kind`` (a rollup's buckets are
    whole hours: compared as their own type, not converted row by row)."""
    clauses = []
    for i, (start, end) in enumerate(ranges):
        clauses.append(
            f"({column} >= {{{prefix}{i}a:{kind}}} AND {column} < {{{prefix}{i}b:{kind}}})"
        )
        params[f"{prefix}{i}a"] = start
        params[f"{prefix}{i}b"] = end
    return " OR ".join(clauses)


def _levels(values: Any) -> tuple[float, float, float]:
    p50, p95, p99 = (_number(value) for value in values)
    return p50, p95, p99


def _number(value: Any) -> float:
    # A mean over no rows is NaN in ClickHouse; an empty period has a mean of 0.
    number = float(value or 0)
    return 0.0 if number != number else number


def log_group(group_by: str | None, params: dict[str, Any]) -> str:
    """The group expression of ``group_by`` over the log (``params`` receives its key)."""
    if group_by is None:
        return "''"
    if group_by.startswith("metadata."):
        params["group_key"] = group_by.removeprefix("metadata.")
        return "metadata_map[{group_key:String}]"
    return GROUPS[group_by].format(time="created_at")


def _score_parts(
    requests: RequestStore, where: str, name: str, traced: bool
) -> tuple[str, str, str]:
    """SQL, each row (name, t, n): a score name's sums (``t`` the total, ``n`` how many
    numeric and boolean scores, from SCORE_SUMS) on the records matching ``where``
    (``name`` the group expression): on each record itself; on each trace once per group
    holding a record of it; on each trace once. A score on a span record (a record that is
    no model call) is its trace's (score_sql.span_records), not a second time the record's
    (``traced``: the trace branches are read)."""
    table = requests.scores_table
    records = f"SELECT {name} AS name, id, trace_id FROM {requests.table} FINAL WHERE {where}"
    # The sums rows as stored, not first summed by target: every row of a target joins the
    # same record (or the same group's trace) and the outer query sums by group anyway, so
    # a GROUP BY target of the name's ~600,000 rows at 1M scores (~100 ms) bought nothing.
    # A row with no number (a category, or a version and its tombstone summed to 0) adds
    # nothing to a mean: left out before the join.
    sums = (
        "SELECT target, total AS t, numbers AS n FROM "
        f"{sibling(table, SCORE_SUMS.name)} WHERE project = {{project:String}} "
        "AND name = {score_name:String} AND on_trace = %d AND numbers != 0"
    )
    of_traces = (
        f"{sums % 1} UNION ALL SELECT sp.span_trace AS target, s.t AS t, s.n AS n FROM "
        f"({sums % 0}) AS s INNER JOIN ({span_records(table, sums % 0)}) AS sp "
        "ON s.target = sp.span_id"
    )
    # A record is one row of ``records`` (FINAL): its own sums join it once, no DISTINCT.
    # The records are the join's right (built) side: faster than building the sums (measured
    # at 1M records, docs/benchmarks.md "Scores at scale").
    not_spans = f" AND target NOT IN ({span_ids(table)})" if traced else ""
    own = (
        f"SELECT r.name AS name, s.t AS t, s.n AS n FROM ({sums % 0}{not_spans}) AS s "
        f"INNER JOIN ({records}) AS r ON r.id = s.target"
    )
    by_trace = (
        "SELECT r.name AS name, s.t AS t, s.n AS n FROM (SELECT DISTINCT {key} AS name, trace_id "
        f"FROM ({records}) WHERE trace_id != '') AS r INNER JOIN ({of_traces}) AS s "
        "ON r.trace_id = s.target"
    )
    return own, by_trace.replace("{key}", "name"), by_trace.replace("{key}", "''")


def score_aggregate(
    client: Client,
    requests: RequestStore,
    project: str,
    score_name: str,
    group_by: str | None,
    filters: RequestFilter,
) -> tuple[GroupRow, list[GroupRow]]:
    """Return the mean of the scores named ``score_name`` on the matching records, and per
    group largest first. A trace's score counts once per group (and once in the total),
    however many of the trace's records the group holds."""
    where, params = filter_where(project, filters)
    params["score_name"] = score_name
    name = log_group(group_by, params)
    # A name never scored on a trace or a span record (one key read) leaves the trace
    # branches out: each scans the matching records again for their traces, to join nothing.
    traced = bool(requests.names_scored_on_traces(project, [score_name]))
    own, per_group, once = _score_parts(requests, where, name, traced)
    # One query: the records' own sums (branch 0) are joined once, for the total and the
    # groups; a trace's sums count once per group holding it (1) and once in the total (2).
    branches = [f"SELECT 0 AS g, name, t, n FROM ({own})"]
    if traced:
        if group_by is not None:
            branches.append(f"SELECT 1 AS g, name, t, n FROM ({per_group})")
        branches.append(f"SELECT 2 AS g, '' AS name, t, n FROM ({once})")
    rows = client.query(
        f"SELECT g, name, sum(t), sum(n) FROM ({' UNION ALL '.join(branches)}) GROUP BY g, name",
        parameters=params,
        # Both sides sorted and merged instead of a hash table of every matching record's
        # id: 93 against 138-171 ms for the own branch at 1M records and 1M scores
        # (docs/benchmarks.md, "Scores at scale"), the same sums.
        settings={"join_algorithm": "full_sorting_merge"},
    ).result_rows
    total, count = 0.0, 0
    groups: dict[str, list[float]] = {}
    for branch, group, t, n in rows:
        if branch != 1:
            total, count = total + float(t), count + int(n)
        if branch != 2:
            entry = groups.setdefault(str(group), [0.0, 0])
            entry[0] += float(t)
            entry[1] += int(n)
    total_row = GroupRow("", _mean(total, count), count, None)
    if group_by is None:
        return total_row, []
    ranked = sorted(
        ((_mean(t, n), g, int(n)) for g, (t, n) in groups.items()), key=lambda r: (-r[0], r[1])
    )
    return total_row, [GroupRow(g, value, n, None) for value, g, n in ranked[:_MAX_GROUPS]]


def _mean(total: float, count: float) -> float:
    """``total / count``, the total taken to 12 significant digits (0 when nothing counts).

    The sums rows reach the sum in no fixed order: a replaced score's +0.9, its tombstone's
    -0.9 and the new +0.1 add up to 0.09999999999999998 in one order and 0.1 in another.
    Twelve digits are far finer than any score's meaning and hide that last-bit noise.
    """
    return float(f"{total:.12g}") / count if count else 0.0
