"""Experiments and their results: every SQL statement that reads or writes them (see
docs/api-notes.md, "Datasets and experiments").

An experiment is one row per change (status, completion), newest ``updated_at`` wins; a result
is one row per (item, repetition), newest ``written_at`` wins, so a result posted again
replaces it. Reads use ``FINAL``. Counts and summaries are always computed from the result
rows, each of which is written whole in one insert: a summary never counts half a result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .request_tables import TRACE_RECORDS
from .schema import Table, quote
from .writes import WriteOutcome, direct_write

EXPERIMENTS = Table(
    name="experiments",
    columns=(
        "project String",
        "id String",
        "name String",
        "dataset_id String",
        "dataset_name String",
        "prompt_name String",  # '' for an experiment run in the client's code
        "version Nullable(UInt32)",
        "model String",
        "task LowCardinality(String)",  # service | client
        "status LowCardinality(String)",
        "spec String",  # JSON: evaluators, label, parameters, repetitions, concurrency, reason
        "metadata String",
        "items UInt32",
        "runs UInt32",
        "created_at DateTime64(3, 'UTC')",
        "completed_at Nullable(DateTime64(3, 'UTC'))",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, id)",
)

EXPERIMENT_RESULTS = Table(
    name="experiment_results",
    columns=(
        "project String",
        "experiment_id String",
        "position UInt64",  # the item's position in its dataset: results read in item order
        "item_id String",
        "repetition UInt16",
        "request_id String",
        "trace_id String",
        "input_variables String",
        "expected_output Nullable(String)",
        "output String",
        "status LowCardinality(String)",  # success | error
        "error String",
        "scores String",  # JSON object name -> value
        "latency_ms Nullable(Float64)",
        "estimated_cost_usd Float64",
        "judge_cost_usd Float64",
        "total_tokens UInt64",
        "written_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("written_at",),
    order_by="(project, experiment_id, position, item_id, repetition)",
)


@dataclass(frozen=True)
class ExperimentRow:
    """One experiment as stored."""

    id: str
    name: str
    dataset_id: str
    dataset_name: str
    prompt_name: str | None
    version: int | None
    model: str | None
    task: str
    status: str
    spec: dict[str, Any]
    metadata: dict[str, Any]
    items: int
    runs: int
    created_at: datetime
    completed_at: datetime | None = None


@dataclass(frozen=True)
class ResultRow:
    """One result (one repetition of an item) as stored."""

    item_id: str
    repetition: int
    position: int
    request_id: str | None
    trace_id: str | None
    input_variables: dict[str, Any]
    expected_output: Any
    output: str
    status: str
    error: str
    scores: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    estimated_cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    total_tokens: int = 0


@dataclass(frozen=True)
class SummaryFigures:
    """What an experiment's summary is computed from; ``scores``: name -> (mean, sd, n)."""

    done: int
    errors: int
    estimated_cost_usd: float
    judge_cost_usd: float
    total_tokens: int
    latency_p50: float | None
    latency_p95: float | None
    scores: dict[str, tuple[float, float, int]]
    # The score names whose every value was a boolean (a mean of them lies in [0, 1]).
    booleans: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CompareFigures:
    """What a comparison is computed from; ``scores``: name -> (base mean, candidate mean,
    delta mean, delta sd, pairs, improved, regressed); ``order``: every paired item id, the
    most negative delta first, then by the base's item order (a page is a slice of it)."""

    scores: dict[str, tuple[float, float, float, float, int, int, int]]
    paired: int
    unmatched: int
    order: list[str]
    booleans: frozenset[str] = frozenset()


# A delta this close to zero is "unchanged" (float noise of means).
_EPSILON = 1e-9


def _score_values(table: str, experiments: str) -> str:
    """SQL: one row per numeric score of the results of ``experiments`` (``{e:String}``, or
    ``b_or_c`` for the two of a comparison): experiment_id, item_id, name, v, and is_bool (whether
    the value is a boolean). Booleans count as 1/0; text scores and non-finite numbers are
    left out."""
    which = (
        "experiment_id IN ({b:String}, {c:String})"
        if experiments == "b_or_c"
        else f"experiment_id = {experiments}"
    )
    value = "multiIf(kv.2 = 'true', 1., kv.2 = 'false', 0., toFloat64OrNull(kv.2))"
    return (
        f"SELECT experiment_id, item_id, name, v, is_bool FROM (SELECT experiment_id, item_id, "
        f"kv.1 AS name, {value} AS v, kv.2 IN ('true', 'false') AS is_bool FROM {table} FINAL "
        "ARRAY JOIN JSONExtractKeysAndValuesRaw(scores) AS kv "
        f"WHERE project = {{p:String}} AND {which}) WHERE v IS NOT NULL AND isFinite(v)"
    )


_EXPERIMENT_COLUMNS = EXPERIMENTS.inserted_columns()
_RESULT_COLUMNS = EXPERIMENT_RESULTS.inserted_columns()
_RESULT_READ = (
    "item_id, repetition, position, request_id, trace_id, input_variables, expected_output, "
    "output, status, error, scores, latency_ms, estimated_cost_usd, judge_cost_usd, total_tokens"
)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class ExperimentStore:
    """Reads and writes ``experiments`` and ``experiment_results``."""

    def __init__(
        self,
        client: Client,
        database: str,
        cluster: str | None = None,
        log_client: Client | None = None,
    ) -> None:
        self._client = client
        # A result's cost read from its trace's records settles the request log's journal
        # first (``Store.log_client``): records the SDK shipped before the result are counted.
        self._log_client = log_client or client
        db = quote(database)
        self._experiments = f"{db}.{quote(EXPERIMENTS.name)}"
        self._results = f"{db}.{quote(EXPERIMENT_RESULTS.name)}"
        self._trace_records = f"{db}.{quote(TRACE_RECORDS.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    # -- experiments -----------------------------------------------------------------------

    def put(self, project: str, row: ExperimentRow) -> WriteOutcome:
        """Store an experiment (a new version of its id).

        Every write of this store answers :data:`~.writes.STORED`, or :class:`~.writes.Refused`
        on a store outage (the service answers its 503); a bug is raised. A refused write
        stored nothing, and a retry is safe (a newer version of the same key).
        """
        return direct_write(lambda: self._put(project, row))

    def _put(self, project: str, row: ExperimentRow) -> None:
        self._client.insert(
            self._experiments,
            [
                [
                    project,
                    row.id,
                    row.name,
                    row.dataset_id,
                    row.dataset_name,
                    row.prompt_name or "",
                    row.version,
                    row.model or "",
                    row.task,
                    row.status,
                    json.dumps(row.spec, ensure_ascii=False),
                    json.dumps(row.metadata, ensure_ascii=False),
                    row.items,
                    row.runs,
                    row.created_at,
                    row.completed_at,
                    datetime.now(UTC),
                ]
            ],
            column_names=_EXPERIMENT_COLUMNS,
            column_type_names=EXPERIMENTS.column_types(_EXPERIMENT_COLUMNS),
            settings=self._write,
        )

    def get(self, project: str, experiment_id: str) -> ExperimentRow | None:
        """Return an experiment by id, or None."""
        rows = self._where(project, "id = {id:String}", id=experiment_id)
        return rows[0] if rows else None

    def page(
        self,
        project: str,
        dataset_id: str | None,
        prompt_name: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[ExperimentRow]:
        """Return up to ``limit`` experiments, newest first, after ``after``."""
        where: list[str] = ["1"]
        params: dict[str, Any] = {}
        if dataset_id is not None:
            where.append("dataset_id = {ds:String}")
            params["ds"] = dataset_id
        if prompt_name is not None:
            where.append("prompt_name = {pn:String}")
            params["pn"] = prompt_name
        if after is not None:
            where.append("(created_at, id) < ({at:DateTime64(3, 'UTC')}, {aid:String})")
            params.update(at=after[0], aid=after[1])
        return self._where(
            project,
            " AND ".join(where),
            tail=" ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
            limit=limit,
            **params,
        )

    def running(self, project: str | None, task: str) -> list[tuple[str, ExperimentRow]]:
        """Return (project, experiment) of every running experiment of a task kind."""
        where = "status = 'running' AND task = {task:String}"
        params: dict[str, Any] = {"task": task}
        if project is not None:
            where += " AND project = {p:String}"
            params["p"] = project
        result = self._client.query(
            f"SELECT project, {_EXPERIMENT_READ} FROM {self._experiments} FINAL WHERE {where}",
            parameters=params,
            settings=self._read,
        )
        return [(str(r[0]), _experiment(r[1:])) for r in result.result_rows]

    def client_ids(self, project: str, ids: Sequence[str]) -> set[str]:
        """Return those of ``ids`` that name an experiment of ``project`` run by the client."""
        if not ids:
            return set()
        result = self._client.query(
            f"SELECT DISTINCT id FROM {self._experiments} WHERE project = {{p:String}} "
            "AND id IN {ids:Array(String)} AND task = 'client'",
            parameters={"p": project, "ids": list(ids)},
            settings=self._read,
        )
        return {str(r[0]) for r in result.result_rows}

    def _where(
        self, project: str, where: str, tail: str = "", **params: Any
    ) -> list[ExperimentRow]:
        result = self._client.query(
            f"SELECT {_EXPERIMENT_READ} FROM {self._experiments} FINAL "
            f"WHERE project = {{p:String}} AND {where}{tail}",
            parameters={"p": project, **params},
            settings=self._read,
        )
        return [_experiment(r) for r in result.result_rows]

    # -- results ---------------------------------------------------------------------------

    def put_results(
        self, project: str, experiment_id: str, rows: Sequence[ResultRow]
    ) -> WriteOutcome:
        """Store results (each replaces an earlier one of its item and repetition); answers
        as :meth:`put` does."""
        return direct_write(lambda: self._put_results(project, experiment_id, rows))

    def _put_results(self, project: str, experiment_id: str, rows: Sequence[ResultRow]) -> None:
        if not rows:
            return
        written = datetime.now(UTC)
        self._client.insert(
            self._results,
            [
                [
                    project,
                    experiment_id,
                    r.position,
                    r.item_id,
                    r.repetition,
                    r.request_id or "",
                    r.trace_id or "",
                    json.dumps(r.input_variables, ensure_ascii=False),
                    None
                    if r.expected_output is None
                    else json.dumps(r.expected_output, ensure_ascii=False),
                    r.output,
                    r.status,
                    r.error,
                    json.dumps(r.scores, ensure_ascii=False),
                    r.latency_ms,
                    r.estimated_cost_usd,
                    r.judge_cost_usd,
                    r.total_tokens,
                    written,
                ]
                for r in rows
            ],
            column_names=_RESULT_COLUMNS,
            column_type_names=EXPERIMENT_RESULTS.column_types(_RESULT_COLUMNS),
            settings=self._write,
        )

    def results(
        self,
        project: str,
        experiment_id: str,
        after: tuple[int, str, int] | None = None,
        limit: int | None = None,
    ) -> list[ResultRow]:
        """Return results in item order (then repetition), after ``after``."""
        where = "project = {p:String} AND experiment_id = {e:String}"
        params: dict[str, Any] = {"p": project, "e": experiment_id}
        if after is not None:
            where += (
                " AND (position, item_id, repetition) > ({ap:UInt64}, {ai:String}, {ar:UInt16})"
            )
            params.update(ap=after[0], ai=after[1], ar=after[2])
        tail = " ORDER BY position, item_id, repetition"
        if limit is not None:
            tail += " LIMIT {limit:UInt32}"
            params["limit"] = limit
        result = self._client.query(
            f"SELECT {_RESULT_READ} FROM {self._results} FINAL WHERE {where}{tail}",
            parameters=params,
            settings=self._read,
        )
        return [_result(r) for r in result.result_rows]

    def summary_figures(
        self, project: str, experiment_id: str, with_scores: bool = True, traced: bool = False
    ) -> SummaryFigures:
        """Counts, cost, tokens, latency percentiles and per-score (mean, sd, n), computed by
        ClickHouse over the stored results (nothing read row by row); without
        ``with_scores``, no per-score figures (what a comparison's cost and latency need).

        ``traced`` (results the client's code posted): a result with no cost of its own
        counts the cost and tokens of the records of its trace, read now (see
        :meth:`trace_costs`), each trace once, in the same query (a scalar subquery: an
        experiments page reads one summary per experiment)."""
        params = {"p": project, "e": experiment_id}
        success = "status = 'success' AND latency_ms IS NOT NULL"
        trace_sums = (
            f"(SELECT tuple(sum(estimated_cost_usd), sum(total_tokens)) "
            f"FROM {self._trace_records} FINAL WHERE project = {{p:String}} "
            f"AND trace_id IN ({_unpriced_traces(self._results)}))"
            if traced
            else "tuple(0., 0)"
        )
        totals = (
            (self._log_client if traced else self._client)
            .query(
                "SELECT count(), countIf(status = 'error'), sum(estimated_cost_usd), "
                f"sum(judge_cost_usd), sum(total_tokens), countIf({success}), "
                "quantilesExactInclusiveIf(0.5, 0.95)"
                f"(assumeNotNull(latency_ms), {success}), {trace_sums} FROM {self._results} FINAL "
                "WHERE project = {p:String} AND experiment_id = {e:String}",
                parameters=params,
                settings=self._read,
            )
            .result_rows[0]
        )
        scores: Sequence[Sequence[Any]] = []
        if with_scores:
            scores = self._client.query(
                "SELECT name, avg(v), stddevSamp(v), count(), min(is_bool) FROM ("
                f"{_score_values(self._results, '{e:String}')}"
                ") GROUP BY name ORDER BY name",
                parameters=params,
                settings=self._read,
            ).result_rows
        timed = int(totals[5])
        trace_cost, trace_tokens = totals[7]
        return SummaryFigures(
            done=int(totals[0]),
            errors=int(totals[1]),
            # A float sum depends on the order the rows come in, which a merge or a restart
            # may change: to a trillionth of a dollar, the same summary every time it is read.
            estimated_cost_usd=round(float(totals[2]) + float(trace_cost or 0.0), 12),
            judge_cost_usd=round(float(totals[3]), 12),
            total_tokens=int(totals[4]) + int(trace_tokens or 0),
            latency_p50=float(totals[6][0]) if timed else None,
            latency_p95=float(totals[6][1]) if timed else None,
            scores={str(r[0]): (float(r[1]), float(r[2]), int(r[3])) for r in scores},
            booleans=frozenset(str(r[0]) for r in scores if r[4]),
        )

    def trace_costs(self, project: str, trace_ids: Sequence[str]) -> dict[str, float]:
        """The cost of each of these traces: the sum over its live records, read when asked,
        so that records arriving after their result (the SDK ships them on its own) count."""
        if not trace_ids:
            return {}
        rows = self._log_client.query(
            f"SELECT trace_id, sum(estimated_cost_usd) FROM {self._trace_records} FINAL "
            "WHERE project = {p:String} AND trace_id IN {ids:Array(String)} GROUP BY trace_id",
            parameters={"p": project, "ids": sorted(set(trace_ids))},
            settings=self._read,
        ).result_rows
        return {str(r[0]): float(r[1]) for r in rows}

    def compare_figures(self, project: str, base: str, candidate: str) -> CompareFigures:
        """Pair two experiments by item inside ClickHouse: per score the paired means and the
        deltas' mean, sd, count and signs; then, per item, whether both sides have it, its
        base position and its most negative delta, from which the order of the paired items
        is made here (two queries, each one pass over the two experiments' results)."""
        params = {"p": project, "b": base, "c": candidate}
        # Each (item, score name) scored on both sides: the two sides' means (over repetitions)
        # and their difference, in one aggregation (no join of the two sides).
        deltas = (
            "SELECT item_id, name, vb, vc, vc - vb AS d, is_bool FROM (SELECT item_id, name, "
            "min(is_bool) AS is_bool, "
            "avgIf(v, experiment_id = {b:String}) AS vb, avgIf(v, experiment_id = {c:String}) "
            f"AS vc FROM ({_score_values(self._results, 'b_or_c')}) GROUP BY item_id, name "
            "HAVING countIf(experiment_id = {b:String}) > 0 "
            "AND countIf(experiment_id = {c:String}) > 0)"
        )
        scores = self._client.query(
            "SELECT name, avg(vb), avg(vc), avg(d), stddevSamp(d), count(), "
            f"countIf(d > {_EPSILON}), countIf(d < -{_EPSILON}), min(is_bool) FROM ({deltas}) "
            "GROUP BY name ORDER BY name",
            parameters=params,
            settings=self._read,
        ).result_rows
        items = self._client.query(
            "SELECT i.item_id, i.sides, i.pos, m.md FROM (SELECT item_id, "
            "uniqExact(experiment_id) AS sides, minIf(position, experiment_id = {b:String}) "
            f"AS pos FROM {self._results} FINAL WHERE project = {{p:String}} "
            "AND experiment_id IN ({b:String}, {c:String}) GROUP BY item_id) AS i LEFT JOIN "
            f"(SELECT item_id, min(d) AS md FROM ({deltas}) GROUP BY item_id) AS m "
            "ON i.item_id = m.item_id",
            parameters=params,
            settings={**self._read, "join_use_nulls": 1},
        ).result_rows
        paired = [
            (r[3] if r[3] is not None else 0.0, int(r[2]), str(r[0])) for r in items if r[1] == 2
        ]
        paired.sort()
        return CompareFigures(
            scores={
                str(r[0]): (
                    float(r[1]),
                    float(r[2]),
                    float(r[3]),
                    float(r[4]),
                    int(r[5]),
                    int(r[6]),
                    int(r[7]),
                )
                for r in scores
            },
            paired=len(paired),
            unmatched=sum(1 for r in items if r[1] == 1),
            order=[item for _, _, item in paired],
            booleans=frozenset(str(r[0]) for r in scores if r[8]),
        )

    def of_items(
        self, project: str, experiment_id: str, item_ids: Sequence[str]
    ) -> list[ResultRow]:
        """Return every result of these items, whole, in item order then repetition."""
        if not item_ids:
            return []
        result = self._client.query(
            f"SELECT {_RESULT_READ} FROM {self._results} FINAL WHERE project = {{p:String}} "
            "AND experiment_id = {e:String} AND item_id IN {ids:Array(String)} "
            "ORDER BY position, item_id, repetition",
            parameters={"p": project, "e": experiment_id, "ids": list(item_ids)},
            settings=self._read,
        )
        return [_result(row) for row in result.result_rows]


def _unpriced_traces(results: str) -> str:
    """SQL: the traces of an experiment's results (``{p}``, ``{e}``) that carry no cost of
    their own (a result posted by the client's code: its calls are captured and priced as
    the records of its trace)."""
    return (
        f"SELECT trace_id FROM {results} FINAL WHERE project = {{p:String}} "
        "AND experiment_id = {e:String} AND trace_id != '' AND estimated_cost_usd = 0"
    )


_EXPERIMENT_READ = (
    "id, name, dataset_id, dataset_name, prompt_name, version, model, task, status, spec, "
    "metadata, items, runs, created_at, completed_at"
)


def _experiment(r: Sequence[Any]) -> ExperimentRow:
    return ExperimentRow(
        id=str(r[0]),
        name=str(r[1]),
        dataset_id=str(r[2]),
        dataset_name=str(r[3]),
        prompt_name=str(r[4]) or None,
        version=None if r[5] is None else int(r[5]),
        model=str(r[6]) or None,
        task=str(r[7]),
        status=str(r[8]),
        spec=json.loads(r[9]),
        metadata=json.loads(r[10]),
        items=int(r[11]),
        runs=int(r[12]),
        created_at=_utc(r[13]),
        completed_at=None if r[14] is None else _utc(r[14]),
    )


def _result(r: Sequence[Any]) -> ResultRow:
    return ResultRow(
        item_id=str(r[0]),
        repetition=int(r[1]),
        position=int(r[2]),
        request_id=str(r[3]) or None,
        trace_id=str(r[4]) or None,
        input_variables=json.loads(r[5]),
        expected_output=None if r[6] is None else json.loads(r[6]),
        output=str(r[7]),
        status=str(r[8]),
        error=str(r[9]),
        scores=json.loads(r[10]),
        latency_ms=r[11],
        estimated_cost_usd=float(r[12]),
        judge_cost_usd=float(r[13]),
        total_tokens=int(r[14]),
    )
