"""Aggregations over the request log, computed inside ClickHouse.

A query reads two sources and adds them up: the rollup's sums for the hours a plan says are
sealed (see :mod:`.rollups`), and the log itself, with FINAL, for the rest of the period. Both
sides give the same partial sums (records, cost, tokens, latency, errors and the latency
percentiles as an aggregate state), so the outer query computes every metric from the sums of
either or both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .requests import RequestFilter, RequestStore
from .rollups import LEVELS, RollupStore

# Each metric from the partial sums named in _RAW_SUMS / _ROLLUP_SUMS.
METRICS = {
    "cost": "sum(part_cost)",
    "usage": "sum(part_tokens)",
    "latency": "sum(part_latency) / sum(part_records)",
    "errors": "sum(part_errors)",
}

# Group expressions over a time column: the log's created_at or the rollup's hour.
GROUPS = {
    "prompt_name": "prompt_name",
    "model": "model",
    "status": "toString(status)",
    "version": "toString(version)",
    "day": "formatDateTime(toStartOfDay({time}), '%Y-%m-%d')",
    "hour": "formatDateTime(toStartOfHour({time}), '%Y-%m-%dT%H:00:00Z')",
}

# (Named apart from the rollup's columns: an alias equal to a column would shadow it.)
_RAW_SUMS = (
    "count() AS part_records, sum(estimated_cost_usd) AS part_cost, "
    "sum(total_tokens) AS part_tokens, sum(latency_ms) AS part_latency, "
    "countIf(status = 'error') AS part_errors"
)
_ROLLUP_SUMS = (
    "sum(records) AS part_records, sum(cost) AS part_cost, sum(tokens) AS part_tokens, "
    "sum(latency_sum) AS part_latency, sumIf(records, status = 'error') AS part_errors"
)

_MAX_GROUPS = 1000


@dataclass(frozen=True)
class Plan:
    """Where a query reads each part of its period: ``[start, end)`` ranges.

    ``sealed`` ranges are whole hours read from the rollup, ``raw`` ranges are read from
    the log. Together they cover every record of the period exactly once.
    """

    sealed: list[tuple[datetime, datetime]] = field(default_factory=list)
    raw: list[tuple[datetime, datetime]] = field(default_factory=list)


@dataclass(frozen=True)
class _Query:
    """One aggregation: what each part of it reads, and the parameters they collect."""

    project: str
    group_by: str | None
    filters: RequestFilter
    percentiles: bool
    params: dict[str, Any]


@dataclass(frozen=True)
class GroupRow:
    """One group: name, metric value, record count, latency percentiles when asked."""

    name: str
    value: float
    count: int
    percentiles: tuple[float, float, float] | None


class AnalyticsStore:
    """Runs analytics queries on the request log and its rollup."""

    def __init__(self, client: Client, requests: RequestStore, rollups: RollupStore) -> None:
        self._client = client
        self._requests = requests
        self._rollups = rollups

    def total(
        self, project: str, metric: str, filters: RequestFilter, plan: Plan
    ) -> tuple[float, int]:
        """Return the metric over all matching records, and their count."""
        rows = self._aggregate(project, metric, None, filters, plan, percentiles=False)
        if not rows:
            return 0.0, 0
        return rows[0].value, rows[0].count

    def groups(
        self,
        project: str,
        metric: str,
        group_by: str,
        filters: RequestFilter,
        plan: Plan,
        percentiles: bool,
    ) -> list[GroupRow]:
        """Return the metric per group, largest first."""
        return self._aggregate(project, metric, group_by, filters, plan, percentiles)

    def _aggregate(
        self,
        project: str,
        metric: str,
        group_by: str | None,
        filters: RequestFilter,
        plan: Plan,
        percentiles: bool,
    ) -> list[GroupRow]:
        query = _Query(project, group_by, filters, percentiles, {"max_groups": _MAX_GROUPS})
        params = query.params
        parts = []
        if plan.raw:
            parts.append(self._raw_part(query, plan.raw))
        if plan.sealed:
            parts.append(self._rollup_part(query, plan.sealed))
        if not parts:
            return []
        state = f", quantilesMerge({LEVELS})(part_q)" if percentiles else ""
        union = " UNION ALL ".join(f"({part})" for part in parts)
        rows = self._client.query(
            f"SELECT name, {METRICS[metric]} AS value, sum(part_records){state} "
            f"FROM ({union}) GROUP BY name ORDER BY value DESC, name LIMIT {{max_groups:UInt32}}",
            parameters=params,
        ).result_rows
        return [
            GroupRow(
                name=str(r[0]),
                value=_number(r[1]),
                count=int(r[2]),
                percentiles=(float(r[3][0]), float(r[3][1]), float(r[3][2]))
                if percentiles
                else None,
            )
            for r in rows
            # A period with no records still aggregates to one all-zero row.
            if group_by is not None or int(r[2])
        ]

    def _raw_part(self, query: _Query, ranges: list[tuple[datetime, datetime]]) -> str:
        params, group_by = query.params, query.group_by
        untimed = replace(query.filters, start=None, end=None)
        where, raw_params = self._requests.where(query.project, untimed)
        params.update(raw_params)
        if group_by is None:
            name = "''"
        elif group_by.startswith("metadata."):
            name = "metadata_map[{group_key:String}]"
            params["group_key"] = group_by.removeprefix("metadata.")
        else:
            name = GROUPS[group_by].format(time="created_at")
        state = f", quantilesState({LEVELS})(latency_ms) AS part_q" if query.percentiles else ""
        return (
            f"SELECT {name} AS name, {_RAW_SUMS}{state} FROM {self._requests.table} FINAL "
            f"WHERE {where} AND ({_ranges('created_at', 'raw', ranges, params)}) GROUP BY name"
        )

    def _rollup_part(self, query: _Query, ranges: list[tuple[datetime, datetime]]) -> str:
        params, group_by = query.params, query.group_by
        # Only filters and groups the rollup keeps are ever planned onto it.
        assert not query.filters.metadata and not (group_by or "").startswith("metadata.")
        clauses = ["project = {project:String}"]
        params["project"] = query.project
        for column in ("prompt_name", "model", "status"):
            value = getattr(query.filters, column)
            if value is not None:
                clauses.append(f"{column} = {{{column}:String}}")
                params[column] = value
        hours = _ranges("hour", "sealed", ranges, params)
        # Each hour's rows of its newest seal: a sealer that re-sealed the hour since the
        # plan was made wrote its rows before its seal, and they sum the same records.
        clauses.append(
            f"({hours}) AND (hour, sealed_at) IN (SELECT hour, max(sealed_at) "
            f"FROM {self._rollups.seals} WHERE project = {{project:String}} AND ({hours}) "
            "GROUP BY hour)"
        )
        name = "''" if group_by is None else GROUPS[group_by].format(time="hour")
        state = (
            f", quantilesMergeState({LEVELS})(latency_quantiles) AS part_q"
            if query.percentiles
            else ""
        )
        return (
            f"SELECT {name} AS name, {_ROLLUP_SUMS}{state} FROM {self._rollups.table} "
            f"WHERE {' AND '.join(clauses)} GROUP BY name"
        )


def _ranges(
    column: str, prefix: str, ranges: list[tuple[datetime, datetime]], params: dict[str, Any]
) -> str:
    clauses = []
    for i, (start, end) in enumerate(ranges):
        clauses.append(
            f"({column} >= {{{prefix}{i}a:DateTime64(3, 'UTC')}} "
            f"AND {column} < {{{prefix}{i}b:DateTime64(3, 'UTC')}})"
        )
        params[f"{prefix}{i}a"] = start
        params[f"{prefix}{i}b"] = end
    return " OR ".join(clauses)


def _number(value: Any) -> float:
    # A mean over no rows is NaN in ClickHouse; an empty period has a mean of 0.
    number = float(value or 0)
    return 0.0 if number != number else number
