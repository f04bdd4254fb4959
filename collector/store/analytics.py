"""Aggregations over the request log: one GROUP BY per query, computed inside ClickHouse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client

from .requests import RequestFilter, RequestStore

METRICS = {
    "cost": "sum(estimated_cost_usd)",
    "usage": "sum(total_tokens)",
    "latency": "avg(latency_ms)",
    "errors": "countIf(status = 'error')",
}

GROUPS = {
    "prompt_name": "prompt_name",
    "model": "model",
    "status": "toString(status)",
    "version": "toString(version)",
    "day": "formatDateTime(toStartOfDay(created_at), '%Y-%m-%d')",
    "hour": "formatDateTime(toStartOfHour(created_at), '%Y-%m-%dT%H:00:00Z')",
}

_MAX_GROUPS = 1000


@dataclass(frozen=True)
class GroupRow:
    """One group: name, metric value, record count, latency percentiles when asked."""

    name: str
    value: float
    count: int
    percentiles: tuple[float, float, float] | None


class AnalyticsStore:
    """Runs analytics queries on the request log."""

    def __init__(self, client: Client, requests: RequestStore) -> None:
        self._client = client
        self._requests = requests

    def total(self, project: str, metric: str, filters: RequestFilter) -> tuple[float, int]:
        """Return the metric over all matching records, and their count."""
        where, params = self._requests.where(project, filters)
        rows = self._client.query(
            f"SELECT {METRICS[metric]}, count() FROM {self._requests.table} FINAL WHERE {where}",
            parameters=params,
        ).result_rows
        value, count = rows[0]
        return _number(value), int(count)

    def groups(
        self,
        project: str,
        metric: str,
        group_by: str,
        filters: RequestFilter,
        percentiles: bool,
    ) -> list[GroupRow]:
        """Return the metric per group, largest first."""
        where, params = self._requests.where(project, filters)
        if group_by.startswith("metadata."):
            group_expr = "metadata_map[{group_key:String}]"
            params["group_key"] = group_by.removeprefix("metadata.")
        else:
            group_expr = GROUPS[group_by]
        extra = ", quantiles(0.5, 0.95, 0.99)(latency_ms)" if percentiles else ""
        params["max_groups"] = _MAX_GROUPS
        rows = self._client.query(
            f"SELECT {group_expr} AS name, {METRICS[metric]} AS value, count(){extra} "
            f"FROM {self._requests.table} FINAL WHERE {where} "
            "GROUP BY name ORDER BY value DESC, name LIMIT {max_groups:UInt32}",
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
        ]


def _number(value: Any) -> float:
    # avg() over no rows is NaN in ClickHouse; an empty period has a mean of 0.
    number = float(value or 0)
    return 0.0 if number != number else number
