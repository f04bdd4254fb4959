"""Experiments (CONTRACT 11): a prompt version run over a dataset on the service, or results
posted by the client's code; their summaries and comparisons.

An experiment on the service runs each repetition of each item as one run of section 5 (the record
carries ``metadata.experiment_id`` and ``metadata.dataset_item_id``), at most ``concurrency``
at once, in a task of the collector's event loop. Each result is stored whole, in one insert,
the moment it is done, with every evaluator's verdict; each verdict is also a score (source
``eval``) on the result's record. A provider failure, or an item lacking a variable the
template needs, makes that result an error and the others run on.

Counts and summaries are computed from the stored results on every read, never kept as
running totals: an experiment stopped part way (cancelled, or its collector stopped) reads as
exactly the results it stored. A collector that stops while an experiment runs marks it
``failed`` on its way down, and one that starts again on an embedded store (where it is the
store's only runner) marks any experiment still ``running`` ``failed`` (its process died):
the results already stored stay, nothing is resumed (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import anyio
from pydantic import TypeAdapter, ValidationError

from promptrail._evaluators import evaluate_simple, judge_value

from ..errors import (
    ContractError,
    ExperimentNotFound,
    UpstreamProviderFailed,
    ValidationFailed,
)
from ..models.experiments import ExperimentIn, ResultIn
from ..models.runs import RunRequest
from ..models.scores import infer_data_type
from ..store.datasets import ItemRow
from ..store.experiments import (
    CompareFigures,
    ExperimentRow,
    ExperimentStore,
    ResultRow,
    SummaryFigures,
)
from ..store.request_rows import RequestRow
from ..store.scores import ScoreRow, ScoreStore
from .cursors import CursorCodec
from .datasets import DatasetService
from .evaluators import Evaluator, parse_evaluators
from .ingest import rejection_of
from .intervals import MeanInterval, interval_of, within
from .prompts import PromptService
from .runs import RecordKeeper, RunService, RunTarget
from .templates import provider_for

logger = logging.getLogger("promptrail.experiments")

_RESULT_IN: TypeAdapter[ResultIn] = TypeAdapter(ResultIn)
STOPPED = "the collector stopped while the experiment ran"
# Experiments running in this process, by any collector of it (several collectors of one
# process may share an embedded store: a start-up must not fail what another one runs).
_RUNNING_HERE: set[str] = set()

# Comparisons of two finished experiments kept in memory, the most recently read ones: at
# most this many paired item ids in all (an id and its list slot: ~100 bytes; ~20 MiB).
_COMPARED_ITEMS_KEPT = 200_000


def new_experiment_id() -> str:
    """Return ``exp_<32 hex>``."""
    return f"exp_{os.urandom(16).hex()}"


def eval_score_id(experiment_id: str, request_id: str, name: str) -> str:
    """The id of an evaluator's score on a record: the same verdict again replaces it."""
    digest = hashlib.sha256(f"{experiment_id}|{request_id}|{name}".encode()).hexdigest()
    return f"eval_{digest[:32]}"


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class Computed:
    """What a read adds to an experiment's row: its counts and summary."""

    done: int
    errors: int
    summary: dict[str, Any]


@dataclass(frozen=True)
class ComparePage:
    """A comparison and the cursor of its next page of items."""

    data: dict[str, Any]
    next_cursor: str | None


class ExperimentService:
    """Create, run, cancel, complete, read and compare experiments."""

    def __init__(
        self,
        store: ExperimentStore,
        datasets: DatasetService,
        prompts: PromptService,
        runs: RunService,
        scores: ScoreStore,
        cursor_secret: str,
    ) -> None:
        self._store = store
        self._datasets = datasets
        self._prompts = prompts
        self._runs = runs
        self._scores = scores
        self._cursors = CursorCodec(cursor_secret, "experiments")
        self._result_cursors = CursorCodec(cursor_secret, "experiment results")
        self._compare_cursors = CursorCodec(cursor_secret, "comparison")
        self._tasks: dict[str, tuple[str, asyncio.Task[None]]] = {}
        self._compare_cache: OrderedDict[
            tuple[str, str, str], tuple[CompareFigures, SummaryFigures, SummaryFigures]
        ] = OrderedDict()
        self._compare_lock = threading.Lock()

    # -- create ----------------------------------------------------------------------------

    def create(self, project: str, body: ExperimentIn) -> tuple[ExperimentRow, list[ItemRow]]:
        """Check and store a new experiment (``running``); return it and the items it runs.

        Every client error is raised here, before anything runs.
        """
        evaluators = parse_evaluators(body.evaluators)
        dataset = self._datasets.get(project, body.dataset)
        prompt_name, version, model = None, None, body.model
        if body.task == "service":
            if body.prompt is None:
                raise ValidationFailed("prompt", "an experiment on the service runs a prompt")
            if body.version is not None and body.label is not None:
                raise ValidationFailed("label", "give a version or a label, not both")
            # The version is fixed now: moving the label while it runs changes nothing.
            row = self._prompts.resolve_version(
                project, body.prompt, number=body.version, label=body.label
            )
            prompt_name, version = row.name, row.version
            model = body.model or row.model
            if provider_for(model) is None:
                raise ValidationFailed("model", f"Unknown model '{model}'", model=model)
            for evaluator in evaluators:
                if evaluator.type == "llm_judge":
                    self._prompts.resolve_version(
                        project,
                        evaluator.prompt or "",
                        number=evaluator.version,
                        label=evaluator.label,
                    )
        elif body.prompt is not None or body.version is not None or body.label is not None:
            raise ValidationFailed("prompt", "an experiment run by the client names no prompt")
        items = self._datasets.all_items(project, dataset.id)
        experiment = ExperimentRow(
            id=new_experiment_id(),
            name=body.name or f"{dataset.name} {_now_ms():%Y-%m-%d %H:%M:%S}",
            dataset_id=dataset.id,
            dataset_name=dataset.name,
            prompt_name=prompt_name,
            version=version,
            model=model,
            task=body.task,
            status="running",
            spec={
                "evaluators": [e.as_json() for e in evaluators],
                "label": body.label,
                "parameters": body.parameters,
                "repetitions": body.repetitions,
                "concurrency": body.concurrency,
            },
            metadata=body.metadata,
            items=len(items),
            runs=len(items) * body.repetitions,
            created_at=_now_ms(),
        )
        if body.task == "service" and not items:
            experiment = replace(experiment, status="completed", completed_at=_now_ms())
        self._store.put(project, experiment)
        return experiment, items

    def start(self, project: str, experiment: ExperimentRow, items: Sequence[ItemRow]) -> None:
        """Run a service experiment in the background, on the running event loop."""
        if experiment.task != "service" or experiment.status != "running":
            return
        task = asyncio.get_running_loop().create_task(self._run(project, experiment, items))
        self._tasks[experiment.id] = (project, task)
        _RUNNING_HERE.add(experiment.id)

        def forget(_: asyncio.Task[None]) -> None:
            self._tasks.pop(experiment.id, None)
            _RUNNING_HERE.discard(experiment.id)

        task.add_done_callback(forget)

    # -- run -------------------------------------------------------------------------------

    async def _run(self, project: str, experiment: ExperimentRow, items: Sequence[ItemRow]) -> None:
        evaluators = parse_evaluators(experiment.spec["evaluators"])
        gate = asyncio.Semaphore(int(experiment.spec["concurrency"]))
        repetitions = int(experiment.spec["repetitions"])
        done: list[ResultRow] = []
        # The finished runs' records, stored with their results in the writer's batch.
        records: list[RequestRow] = []
        writing = False

        async def write() -> None:
            # One writer at a time takes every result finished so far: while an insert runs
            # the next results gather, so inserts batch themselves to the store's pace (an
            # insert per result would hold the store's one client for every result).
            nonlocal writing
            if writing:
                return
            writing = True
            try:
                while done:
                    batch, kept = done[:], records[:]
                    del done[:], records[:]
                    await anyio.to_thread.run_sync(self._save, project, experiment, batch, kept)
            finally:
                writing = False

        async def one(item: ItemRow, repetition: int) -> None:
            async with gate:
                result = await self._run_one(
                    project, experiment, evaluators, item, repetition, records.append
                )
            done.append(result)
            await write()

        try:
            async with asyncio.TaskGroup() as group:
                for item in items:
                    for repetition in range(1, repetitions + 1):
                        group.create_task(one(item, repetition))
        except asyncio.CancelledError:
            # Cancelled or stopped (whoever cancelled set the status): store what finished.
            if done and not writing:
                await anyio.to_thread.run_sync(self._save, project, experiment, done[:], records[:])
            elif records:
                # Their results are lost with the writer; the records are not.
                self._runs.store_later(project, records[:])
            raise
        except BaseException:
            logger.exception("experiment %s failed", experiment.id)
            if records:
                self._runs.store_later(project, records[:])  # runs made: their records stay
            await anyio.to_thread.run_sync(
                self._finish, project, experiment, "failed", "internal error; see the log"
            )
            return
        await anyio.to_thread.run_sync(self._finish, project, experiment, "completed", None)

    async def _run_one(
        self,
        project: str,
        experiment: ExperimentRow,
        evaluators: Sequence[Evaluator],
        item: ItemRow,
        repetition: int,
        keep: RecordKeeper,
    ) -> ResultRow:
        base = ResultRow(
            item_id=item.id,
            repetition=repetition,
            position=item.position,
            request_id=None,
            trace_id=None,
            input_variables=item.input_variables,
            expected_output=item.expected_output,
            output="",
            status="error",
            error="",
        )
        body = RunRequest(
            variables=item.input_variables,
            metadata={
                "experiment_id": experiment.id,
                "dataset_item_id": item.id,
                "repetition": repetition,
            },
        )
        target = RunTarget(experiment.prompt_name or "", number=experiment.version)
        try:
            run = await self._runs.prepare(project, target, body)
            run = self._runs.retarget(run, experiment.model, experiment.spec.get("parameters"))
        except ContractError as exc:
            # A missing variable (INVALID_TEMPLATE names them), or the prompt gone since.
            return replace(base, error=_error_text(exc))
        try:
            answer = await self._runs.complete(run, keep)
        except UpstreamProviderFailed as exc:
            return replace(base, request_id=run.request_id, error=exc.message)
        except Exception as exc:
            logger.exception("run %s of experiment %s failed", run.request_id, experiment.id)
            return replace(
                base, request_id=run.request_id, error=f"internal error: {type(exc).__name__}"
            )
        scores: dict[str, Any] = {}
        judge_cost = 0.0
        for evaluator in evaluators:
            if evaluator.type == "llm_judge":
                value, cost = await self._judge(project, experiment, evaluator, item, answer)
                judge_cost += cost
            else:
                value = evaluate_simple(
                    evaluator.type, answer.output, item.expected_output, evaluator.pattern
                )
            if value is not None:
                scores[evaluator.name] = value
        return replace(
            base,
            request_id=answer.id,
            output=answer.output,
            status="success",
            scores=scores,
            latency_ms=float(answer.latency_ms),
            estimated_cost_usd=answer.usage.estimated_cost_usd,
            judge_cost_usd=judge_cost,
            total_tokens=answer.usage.total_tokens,
        )

    async def _judge(
        self,
        project: str,
        experiment: ExperimentRow,
        evaluator: Evaluator,
        item: ItemRow,
        answer: Any,
    ) -> tuple[float | None, float]:
        """Run the judge prompt on one output; return its score (None: no verdict) and cost."""
        body = RunRequest(
            variables={
                "input": json.dumps(item.input_variables, ensure_ascii=False),
                "output": answer.output,
                "expected_output": "" if item.expected_output is None else item.expected_output,
            },
            metadata={
                "experiment_id": experiment.id,
                "dataset_item_id": item.id,
                "judge_of": answer.id,
            },
        )
        target = RunTarget(evaluator.prompt or "", evaluator.version, evaluator.label)
        try:
            run = await self._runs.prepare(project, target, body)
            verdict = await self._runs.complete(run)
        except UpstreamProviderFailed:
            return None, 0.0  # the judge's record says why
        except ContractError as exc:
            logger.warning("judge %s of %s: %s", evaluator.name, experiment.id, exc.message)
            return None, 0.0
        return judge_value(verdict.output, evaluator.categories), verdict.usage.estimated_cost_usd

    def _save(
        self,
        project: str,
        experiment: ExperimentRow,
        results: Sequence[ResultRow],
        records: Sequence[RequestRow] = (),
    ) -> None:
        """Store the runs' records, then the results, then each verdict as a score on its
        record: a result anyone can read has its record stored."""
        self._runs.store_records(project, records)
        self._store.put_results(project, experiment.id, results)
        self._scores.insert(
            [
                score
                for result in results
                if result.request_id
                for score in _eval_scores(project, experiment.id, result)
            ]
        )

    def _finish(
        self, project: str, experiment: ExperimentRow, status: str, reason: str | None
    ) -> ExperimentRow:
        current = self._store.get(project, experiment.id) or experiment
        if current.status != "running":
            return current  # cancelled (or completed) meanwhile: that stands
        spec = {**current.spec, **({"error": reason} if reason else {})}
        done = replace(current, status=status, spec=spec, completed_at=_now_ms())
        self._store.put(project, done)
        return done

    # -- cancel, complete, results of the client's code -----------------------------------

    def cancel(self, project: str, experiment_id: str) -> ExperimentRow:
        """Stop a running experiment (its stored results stay); others are answered as they
        are."""
        experiment = self.get_row(project, experiment_id)
        if experiment.status != "running":
            return experiment
        stopped = replace(experiment, status="cancelled", completed_at=_now_ms())
        self._store.put(project, stopped)
        running = self._tasks.get(experiment_id)
        if running is not None:
            running[1].get_loop().call_soon_threadsafe(running[1].cancel)
        return stopped

    def complete(self, project: str, experiment_id: str) -> ExperimentRow:
        """Mark an experiment run by the client's code completed."""
        experiment = self.get_row(project, experiment_id)
        if experiment.task != "client":
            raise ValidationFailed("id", "only an experiment run by the client is completed by it")
        return self._finish(project, experiment, "completed", None)

    def post_results(
        self, project: str, experiment_id: str, raw: Sequence[Any]
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """Store the client's results (each replaces its item's and repetition's); bad ones
        are rejected by index."""
        experiment = self.get_row(project, experiment_id)
        if experiment.task != "client":
            raise ValidationFailed("id", "results are posted to an experiment run by the client")
        if experiment.status != "running":
            raise ValidationFailed("id", f"the experiment is {experiment.status}")
        parsed: list[tuple[int, ResultIn]] = []
        rejected: list[tuple[int, dict[str, Any]]] = []
        for index, item in enumerate(raw):
            try:
                parsed.append((index, _RESULT_IN.validate_python(item)))
            except ValidationError as exc:
                rejected.append((index, rejection_of(exc, "result")))
        items = self._datasets.items_by_id(
            project, experiment.dataset_id, sorted({r.item_id for _, r in parsed})
        )
        repetitions = int(experiment.spec["repetitions"])
        rows: list[ResultRow] = []
        for index, result in parsed:
            item = items.get(result.item_id)
            if item is None or result.repetition > repetitions:
                problem = (
                    f"the dataset has no item '{result.item_id}'"
                    if item is None
                    else f"the experiment has {repetitions} repetitions"
                )
                field = "item_id" if item is None else "repetition"
                rejected.append((index, ValidationFailed(field, problem).body()["error"]))
                continue
            rows.append(
                ResultRow(
                    item_id=item.id,
                    repetition=result.repetition,
                    position=item.position,
                    request_id=result.request_id,
                    trace_id=result.trace_id,
                    input_variables=item.input_variables,
                    expected_output=item.expected_output,
                    output=result.output,
                    status=result.status,
                    error=result.error or "",
                    scores=dict(result.scores),
                    latency_ms=result.latency_ms,
                    estimated_cost_usd=result.estimated_cost_usd or 0.0,
                )
            )
        rejected.sort(key=lambda r: r[0])
        self._save(project, experiment, rows)
        return len(rows), rejected

    # -- reads -----------------------------------------------------------------------------

    def get_row(self, project: str, experiment_id: str) -> ExperimentRow:
        """Return an experiment's row, or 404 EXPERIMENT_NOT_FOUND."""
        row = self._store.get(project, experiment_id)
        if row is None:
            raise ExperimentNotFound(experiment_id)
        return row

    def get(self, project: str, experiment_id: str) -> tuple[ExperimentRow, Computed]:
        """Return an experiment with its counts and summary."""
        row = self.get_row(project, experiment_id)
        return row, self.computed(project, row)

    def computed(self, project: str, row: ExperimentRow) -> Computed:
        """Counts and summary from the stored results."""
        figures = self._store.summary_figures(project, row.id)
        bounds = self._bounds(project, [row], figures.scores, figures.booleans)
        return Computed(figures.done, figures.errors, summary_of(figures, bounds))

    def _bounds(
        self,
        project: str,
        experiments: Sequence[ExperimentRow],
        names: Iterable[str],
        booleans: frozenset[str],
    ) -> dict[str, tuple[float, float]]:
        """The scale of each score name whose scale is known: [0, 1] for booleans and the
        ``similarity`` evaluator, a score config's min and max; other names have none."""
        bounds = dict.fromkeys(booleans, (0.0, 1.0))
        for experiment in experiments:
            for evaluator in experiment.spec.get("evaluators") or []:
                if evaluator.get("type") == "similarity" and evaluator.get("name"):
                    bounds[str(evaluator["name"])] = (0.0, 1.0)
        unknown = [name for name in names if name not in bounds]
        for config in self._scores.configs(project, unknown) if unknown else []:
            if config.data_type == "boolean":
                bounds[config.name] = (0.0, 1.0)
            elif config.min is not None and config.max is not None:
                bounds[config.name] = (config.min, config.max)
        return bounds

    def page(
        self,
        project: str,
        dataset: str | None,
        prompt_name: str | None,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[tuple[ExperimentRow, Computed]], str | None]:
        """Return a page of experiments, newest first, and the next cursor."""
        dataset_id = self._datasets.get(project, dataset).id if dataset else None
        after = None
        if cursor:
            position = self._cursors.decode(cursor)
            try:
                after = (datetime.fromisoformat(position["at"]), str(position["id"]))
            except (KeyError, TypeError, ValueError):
                raise ValidationFailed("cursor", "Invalid cursor") from None
        rows = self._store.page(project, dataset_id, prompt_name, after, limit + 1)
        shown = [(r, self.computed(project, r)) for r in rows[:limit]]
        if len(rows) <= limit:
            return shown, None
        last = rows[limit - 1]
        return shown, self._cursors.encode({"at": last.created_at.isoformat(), "id": last.id})

    def results_page(
        self, project: str, experiment_id: str, limit: int, cursor: str | None
    ) -> tuple[list[ResultRow], str | None]:
        """Return a page of results in item order, and the next cursor."""
        self.get_row(project, experiment_id)
        after = None
        if cursor:
            position = self._result_cursors.decode(cursor)
            try:
                after = (int(position["pos"]), str(position["item"]), int(position["rep"]))
            except (KeyError, TypeError, ValueError):
                raise ValidationFailed("cursor", "Invalid cursor") from None
        rows = self._store.results(project, experiment_id, after, limit + 1)
        if len(rows) <= limit:
            return rows, None
        last = rows[limit - 1]
        return rows[:limit], self._result_cursors.encode(
            {"pos": last.position, "item": last.item_id, "rep": last.repetition}
        )

    def compare(
        self, project: str, base_id: str, candidate_id: str, limit: int, cursor: str | None
    ) -> ComparePage:
        """Pair two experiments' results by item; regressions first (paged items)."""
        offset = 0
        if cursor:
            try:
                offset = int(self._compare_cursors.decode(cursor)["offset"])
            except (KeyError, TypeError, ValueError):
                raise ValidationFailed("cursor", "Invalid cursor") from None
        rows = [self.get_row(project, base_id), self.get_row(project, candidate_id)]
        finished = all(row.status != "running" for row in rows)
        figures, base_figures, candidate_figures = self._compared(
            project, base_id, candidate_id, finished
        )
        page = figures.order[offset : offset + limit]
        base, candidate = summary_of(base_figures), summary_of(candidate_figures)
        bounds = self._bounds(project, rows, figures.scores, figures.booleans)
        data = {
            "scores": {
                name: _compared(*values, bounds.get(name))
                for name, values in figures.scores.items()
            },
            "estimated_cost_usd": _triple(
                base["estimated_cost_usd"], candidate["estimated_cost_usd"]
            ),
            "latency_ms": _triple(base["latency_ms"]["p50"], candidate["latency_ms"]["p50"]),
            "unmatched": figures.unmatched,
            # Only the page's items are read whole (variables, expected output, outputs).
            "items": _page_items(
                page,
                _by_item(self._store.of_items(project, base_id, page)),
                _by_item(self._store.of_items(project, candidate_id, page)),
            ),
        }
        more = offset + limit < figures.paired
        next_cursor = self._compare_cursors.encode({"offset": offset + limit}) if more else None
        return ComparePage(data, next_cursor)

    def _compared(
        self, project: str, base_id: str, candidate_id: str, finished: bool
    ) -> tuple[CompareFigures, SummaryFigures, SummaryFigures]:
        """The figures of a comparison; kept for two finished experiments, whose results can
        no longer change (posting results needs a running experiment), so that paging
        through a comparison computes it once."""
        key = (project, base_id, candidate_id)
        with self._compare_lock:
            kept = self._compare_cache.get(key)
            if kept is not None:
                self._compare_cache.move_to_end(key)
                return kept
        figures = (
            self._store.compare_figures(project, base_id, candidate_id),
            self._store.summary_figures(project, base_id, with_scores=False),
            self._store.summary_figures(project, candidate_id, with_scores=False),
        )
        if finished:
            with self._compare_lock:
                self._compare_cache[key] = figures
                kept_items = sum(len(f[0].order) for f in self._compare_cache.values())
                while kept_items > _COMPARED_ITEMS_KEPT and self._compare_cache:
                    kept_items -= len(self._compare_cache.popitem(last=False)[1][0].order)
        return figures

    # -- lifecycle -------------------------------------------------------------------------

    def recover(self) -> int:
        """Mark ``failed`` every service experiment left ``running`` by a collector that
        died (called at start-up where this process is the store's only runner)."""
        stale = [
            (project, row)
            for project, row in self._store.running(None, "service")
            if row.id not in _RUNNING_HERE
        ]
        for project, row in stale:
            spec = {**row.spec, "error": STOPPED}
            self._store.put(
                project, replace(row, status="failed", spec=spec, completed_at=_now_ms())
            )
        return len(stale)

    def close(self) -> None:
        """Stop the experiments running here and mark them ``failed`` (their results stay)."""
        for experiment_id, (project, task) in list(self._tasks.items()):
            task.cancel()
            try:
                row = self._store.get(project, experiment_id)
                if row is not None:
                    self._finish(project, row, "failed", STOPPED)
            except Exception:
                logger.exception("experiment %s not marked failed", experiment_id)
        self._tasks.clear()


def _error_text(exc: ContractError) -> str:
    missing = exc.details.get("missing_variables")
    if missing:
        return f"the item lacks variables the template needs: {', '.join(missing)}"
    return exc.message


def _eval_scores(project: str, experiment_id: str, result: ResultRow) -> list[ScoreRow]:
    now = _now_ms()
    return [
        ScoreRow(
            project=project,
            id=eval_score_id(experiment_id, result.request_id or "", name),
            request_id=result.request_id,
            trace_id=None,
            name=name,
            data_type=infer_data_type(value),
            value=value,
            comment=None,
            correction=None,
            source="eval",
            metadata={"experiment_id": experiment_id, "dataset_item_id": result.item_id},
            created_at=now,
        )
        for name, value in result.scores.items()
    ]


def _number(value: Any) -> float | None:
    """A score value as a mean counts it (true = 1); None for text."""
    if isinstance(value, bool | int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _interval(found: MeanInterval) -> dict[str, Any]:
    return {
        "mean": found.mean,
        "ci_low": found.ci_low,
        "ci_high": found.ci_high,
        "count": found.count,
    }


def summary_of(
    figures: SummaryFigures, bounds: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """An experiment's summary: per numeric score its mean and 95% interval (within the
    score's scale, where ``bounds`` knows it), the cost (task and judge apart), the tokens,
    and the latency p50/p95 of the successful results."""
    scale = bounds or {}
    return {
        "scores": {
            name: _interval(
                within(interval_of(mean, sd, count), *scale[name])
                if name in scale
                else interval_of(mean, sd, count)
            )
            for name, (mean, sd, count) in figures.scores.items()
        },
        "estimated_cost_usd": figures.estimated_cost_usd,
        "judge_cost_usd": figures.judge_cost_usd,
        "total_tokens": figures.total_tokens,
        "latency_ms": {"p50": figures.latency_p50, "p95": figures.latency_p95},
    }


EMPTY_SUMMARY = summary_of(SummaryFigures(0, 0, 0.0, 0.0, 0, None, None, {}))


def _compared(
    base: float,
    candidate: float,
    delta: float,
    sd: float,
    pairs: int,
    improved: int,
    regressed: int,
    scale: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One score of a comparison: the paired means and the interval of the mean delta
    (within what a delta can be, where the score's ``scale`` is known)."""
    interval = interval_of(delta, sd, pairs)
    if scale is not None:
        width = scale[1] - scale[0]
        interval = within(interval, -width, width)
    return {
        "base": base,
        "candidate": candidate,
        "delta": interval.mean,
        "ci_low": interval.ci_low,
        "ci_high": interval.ci_high,
        "improved": improved,
        "regressed": regressed,
        "unchanged": pairs - improved - regressed,
    }


@dataclass
class _ItemSide:
    """One experiment's results of one item: repetitions averaged per score."""

    first: ResultRow
    numbers: dict[str, list[float]]

    def means(self) -> dict[str, float]:
        return {name: math.fsum(v) / len(v) for name, v in self.numbers.items() if v}


def _by_item(results: Sequence[ResultRow]) -> dict[str, _ItemSide]:
    sides: dict[str, _ItemSide] = {}
    for result in results:  # item order, then repetition
        side = sides.setdefault(result.item_id, _ItemSide(result, {}))
        for name, value in result.scores.items():
            number = _number(value)
            if number is not None:
                side.numbers.setdefault(name, []).append(number)
    return sides


def _page_items(
    page: Sequence[str], base: dict[str, _ItemSide], candidate: dict[str, _ItemSide]
) -> list[dict[str, Any]]:
    """The page's items, both sides whole: outputs of the first repetition, numeric scores
    averaged over the repetitions and text scores as the first gave them."""
    items = []
    for item in page:
        left, right = base[item], candidate[item]
        lm, rm = left.means(), right.means()
        items.append(
            {
                "item_id": item,
                "input_variables": left.first.input_variables,
                "expected_output": left.first.expected_output,
                "base": {"output": left.first.output, "scores": {**left.first.scores, **lm}},
                "candidate": {
                    "output": right.first.output,
                    "scores": {**right.first.scores, **rm},
                },
                "delta": {name: rm[name] - lm[name] for name in sorted(lm.keys() & rm.keys())},
            }
        )
    return items


def _triple(base: float | None, candidate: float | None) -> dict[str, float | None]:
    delta = None if base is None or candidate is None else candidate - base
    return {"base": base, "candidate": candidate, "delta": delta}
