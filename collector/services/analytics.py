"""Analytics (docs/api-notes.md, "Request log"): cost, usage, latency and errors over a period,
grouped."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..errors import ValidationFailed
from ..models.requests import MODEL_CALL_KINDS, RECORD_KINDS, Period
from ..store.analytics import GROUPS, METRICS, AnalyticsStore, GroupRow, Plan
from ..store.request_filters import RequestFilter
from ..store.request_rows import metadata_text
from ..store.writes import PendingWrites
from .dates import parse_date, utc_now_ms
from .requests import environments_of, kinds_of
from .rollups import RollupService

DEFAULT_PERIOD = timedelta(days=30)
_FILTER_KEYS = {"prompt_name", "model", "status", "metadata", "kind", "environment"}


@dataclass(frozen=True)
class ListFilters:
    """The request list's filter parameters, given to analytics as query parameters.

    They narrow the query as the same keys of ``filters`` do; a key given both ways must
    agree (docs/api-notes.md, "Analytics").
    """

    prompt_name: str | None = None
    model: str | None = None
    status: str | None = None
    kind: str | None = None
    trace_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    environment: str | None = None


@dataclass(frozen=True)
class AnalyticsOutcome:
    """Total, groups and the resolved period."""

    metric: str
    total: float
    groups: list[GroupRow]
    start: datetime
    end: datetime
    # metric=cost only: records of the period counted as 0 because their model has no price.
    cost_unknown_records: int | None = None
    # metric=score only: how many scores the total is the mean of.
    score_count: int | None = None

    @property
    def period(self) -> Period:
        """The resolved period, as the answer shows it."""
        return Period(start=self.start, end=self.end)


class AnalyticsService:
    """Validate an analytics query and run it."""

    def __init__(
        self,
        store: AnalyticsStore,
        rollups: RollupService,
        pending: PendingWrites | None = None,
    ) -> None:
        self._store = store
        self._rollups = rollups
        self._pending = pending

    def run(
        self,
        project: str,
        metric: str,
        group_by: str | None,
        start_date: str | None,
        end_date: str | None,
        filters_json: str | None,
        score_name: str | None = None,
        params: ListFilters | None = None,
    ) -> AnalyticsOutcome:
        """Return the metric's total over the period and its value per group.

        ``params``: the list's filters given as query parameters, ANDed with ``filters``.

        ``metric=score`` is the mean of the scores named ``score_name`` on the records
        created in the period (docs/api-notes.md, "Scores and feedback"); each group's count is its
        number of scores.
        """
        if metric not in METRICS and metric != "score":
            raise ValidationFailed(
                "metric", f"metric must be one of {', '.join([*METRICS, 'score'])}", value=metric
            )
        if metric == "score" and not score_name:
            raise ValidationFailed("score_name", "metric=score needs score_name=<name>")
        if group_by is not None and not _valid_group(group_by):
            raise ValidationFailed(
                "group_by",
                f"group_by must be one of {', '.join(GROUPS)} or metadata.<key>",
                value=group_by,
            )
        end = parse_date(end_date, "end_date", end_of_day=True) if end_date else utc_now_ms()
        start = parse_date(start_date, "start_date") if start_date else end - DEFAULT_PERIOD
        if start > end:
            raise ValidationFailed("start_date", "start_date must not be after end_date")
        # metric=score takes the model calls too: a score on a span record counts for its
        # trace, so for the model calls in it (docs/api-notes.md, "Scores and feedback").
        filters = _filters(filters_json, params or ListFilters(), start, end)
        if self._pending is not None:
            self._pending.wait(project)
        if metric == "score":
            total, groups = self._store.scores(project, score_name or "", group_by, filters)
            return AnalyticsOutcome(metric, total.value, groups, start, end, None, total.count)
        plan = self.plan(project, group_by, filters, start, end)
        total, groups = self._store.aggregate(
            project, metric, group_by, filters, plan, percentiles=metric == "latency"
        )
        unpriced = None
        if metric == "cost":
            # From the query's own sums, unless it read rows sealed before the rollup counted.
            unpriced = total.unpriced
            if unpriced is None:
                unpriced = self._store.count_unpriced(project, filters)
        return AnalyticsOutcome(metric, total.value, groups, start, end, unpriced)

    def plan(
        self,
        project: str,
        group_by: str | None,
        filters: RequestFilter,
        start: datetime,
        end: datetime,
    ) -> Plan:
        """Return where the query reads each part of the period.

        The rollup keeps metadata per day alone, without the other filters: a metadata filter
        reads the log throughout, a metadata group with a filter too, and a metadata group
        reads sealed whole days from the rollup and the other hours from the log.
        """
        by_metadata = (group_by or "").startswith("metadata.")
        other_filters = (filters.prompt_name, filters.model, filters.status) != (None,) * 3
        # The rollup sums the model calls alone: a query naming other kinds reads the log (a
        # filter without kinds stands for the service's default, the model calls).
        other_kinds = filters.kinds is not None and filters.kinds != MODEL_CALL_KINDS
        # Neither does it keep traces: one trace's records are read from the log.
        one_trace = filters.trace_id is not None
        # It sums the default view's environments alone (rollups.MODEL_CALLS): a query
        # naming environments (or ``all``) reads the log.
        named = not filters.public_only or filters.environments is not None
        if filters.metadata or (by_metadata and other_filters) or other_kinds or one_trace or named:
            return self._rollups.plan(project, start, end, days=False, hours=False)
        if by_metadata:
            return self._rollups.plan(project, start, end, hours=False)
        return self._rollups.plan(project, start, end, days=group_by != "hour")


def _valid_group(group_by: str) -> bool:
    if group_by.startswith("metadata."):
        key = group_by.removeprefix("metadata.")
        return 0 < len(key) <= 128
    return group_by in GROUPS


def _filters(
    text: str | None,
    params: ListFilters,
    start: datetime,
    end: datetime,
    every_kind: bool = False,
) -> RequestFilter:
    """The filter of a query: model calls unless ``filters.kind`` names kinds (docs/api-notes.md,
    "Traces, sessions and users").

    ``every_kind``: without ``kind``, every kind.
    """
    raw = _merged(_filters_object(text), params)
    for key in ("prompt_name", "model", "status"):
        if key in raw and not isinstance(raw[key], str):
            raise ValidationFailed(f"filters.{key}", f"filters.{key} must be a string")
    if raw.get("status") not in (None, "success", "error"):
        raise ValidationFailed("filters.status", "filters.status must be success or error")
    metadata = raw.get("metadata", {})
    kind = raw.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise ValidationFailed("filters.kind", "filters.kind must be a string")
    environment = raw.get("environment")
    if environment is not None and not isinstance(environment, str):
        raise ValidationFailed("filters.environment", "filters.environment must be a string")
    # As on the list: every environment but the service's own unless named; one trace's
    # records are of every environment.
    environments, public_only = environments_of(
        environment,
        every=params.trace_id is not None,
        field="environment" if params.environment is not None else "filters.environment",
    )
    return RequestFilter(
        prompt_name=raw.get("prompt_name"),
        model=raw.get("model"),
        status=raw.get("status"),
        start=start,
        end=end,
        metadata={str(k): metadata_text(v) for k, v in metadata.items()},
        trace_id=params.trace_id,
        # As on the list, one trace's records are of every kind unless ``kind`` narrows them.
        kinds=_kinds(
            kind,
            every_kind or params.trace_id is not None,
            "kind" if params.kind is not None else "filters.kind",
        ),
        environments=environments,
        public_only=public_only,
    )


def _filters_object(text: str | None) -> dict[str, Any]:
    """The ``filters`` JSON object (empty when not given), its keys and metadata checked."""
    if not text:
        return {}
    try:
        raw: Any = json.loads(text)
    except ValueError:
        raise ValidationFailed("filters", "filters must be a JSON object") from None
    if not isinstance(raw, dict):
        raise ValidationFailed("filters", "filters must be a JSON object")
    unknown = set(raw) - _FILTER_KEYS
    if unknown:
        raise ValidationFailed(
            "filters",
            f"unknown filter keys: {', '.join(sorted(unknown))}",
            allowed=sorted(_FILTER_KEYS),
        )
    if not isinstance(raw.get("metadata", {}), dict):
        raise ValidationFailed("filters.metadata", "filters.metadata must be an object")
    return raw


def _merged(raw: dict[str, Any], params: ListFilters) -> dict[str, Any]:
    """``filters`` with the query parameters added; a key given both ways must agree."""
    merged = dict(raw)
    for key in ("prompt_name", "model", "status", "kind", "environment"):
        value = getattr(params, key)
        if value is None:
            continue
        if key in raw and raw[key] != value:
            raise ValidationFailed(
                key, f"{key} is given as a parameter and in filters, with different values"
            )
        merged[key] = value
    if params.metadata:
        metadata = {str(k): v for k, v in raw.get("metadata", {}).items()}
        for key, value in params.metadata.items():
            if key in metadata and metadata_text(metadata[key]) != value:
                raise ValidationFailed(
                    f"metadata.{key}",
                    f"metadata.{key} is given as a parameter and in filters, with different values",
                )
            metadata[key] = value
        merged["metadata"] = metadata
    return merged


def _kinds(kind: str | None, every_kind: bool, field: str) -> tuple[str, ...] | None:
    """The kinds of ``filters.kind``; ``all`` named one by one (the planner's None is the
    model calls)."""
    kinds = kinds_of(kind, every=every_kind, field=field)
    return RECORD_KINDS if kinds is None and not every_kind else kinds
