"""The experiment service: create, cancel and complete experiments, take the results of the
client's code, and read experiments, results and comparisons.

Its rooms: the job that runs an experiment on the service (:mod:`.runner`), what an
experiment writes (:mod:`.results`), counts and summaries (:mod:`.summaries`) and the
comparison of two (:mod:`.comparison`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ...errors import ExperimentNotFound, ValidationFailed
from ...models.experiments import ExperimentIn, ResultIn
from ...store.datasets import ItemRow
from ...store.experiments import ExperimentRow, ExperimentStore, ResultRow
from ..cursors import CursorCodec, time_key
from ..datasets import DatasetService
from ..evaluation.evaluators import EvaluatorService
from ..evaluators import Evaluator, parse_evaluators
from ..ingest import rejection_of
from ..prompts import PromptService
from ..runs import RunService
from ..scores import ScoreService
from ..templates import template_variables
from .comparison import ComparePage, Comparison
from .results import ResultWriter, now_ms
from .runner import JUDGE_VARIABLES, ExperimentRunner
from .summaries import Computed, ScoreScales, summary_of

_RESULT_IN: TypeAdapter[ResultIn] = TypeAdapter(ResultIn)


def new_experiment_id() -> str:
    """Return ``exp_<32 hex>``."""
    return f"exp_{os.urandom(16).hex()}"


class ExperimentService:
    """Create, run, cancel, complete, read and compare experiments."""

    def __init__(
        self,
        store: ExperimentStore,
        datasets: DatasetService,
        prompts: PromptService,
        runs: RunService,
        scores: ScoreService,
        cursor_secret: str,
        retry_after_seconds: int = 2,
        *,
        named_evaluators: EvaluatorService,
    ) -> None:
        """A write the store refuses answers 503 ``STORE_UNAVAILABLE`` asking the client to
        come back in ``retry_after_seconds`` (Settings.store_retry_after_seconds);
        ``named_evaluators`` resolves the evaluators given by name."""
        self._store = store
        self._named_evaluators = named_evaluators
        self._datasets = datasets
        self._prompts = prompts
        self._writer = ResultWriter(store, runs, scores, retry_after_seconds)
        self._runner = ExperimentRunner(store, runs, self._writer)
        self._routable = runs.routable
        self._scales = ScoreScales(scores)
        self._comparison = Comparison(store, self._scales, cursor_secret)
        self._cursors = CursorCodec(cursor_secret, "experiments")
        self._result_cursors = CursorCodec(cursor_secret, "experiment results")

    # -- create ----------------------------------------------------------------------------

    def create(self, project: str, body: ExperimentIn) -> tuple[ExperimentRow, list[ItemRow]]:
        """Check and store a new experiment (``running``); return it and the items it runs.

        Every client error is raised here, before anything runs.
        """
        # A named evaluator is fixed at its version now, as the prompt's version is.
        evaluators = parse_evaluators(
            self._named_evaluators.resolve_references(project, body.evaluators)
        )
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
            if not self._routable(project, model):
                raise ValidationFailed("model", f"Unknown model '{model}'", model=model)
            self._check_judges(project, evaluators)
        elif body.prompt is not None or body.version is not None or body.label is not None:
            raise ValidationFailed("prompt", "an experiment run by the client names no prompt")
        items = self._datasets.all_items(project, dataset.id)
        experiment = ExperimentRow(
            id=new_experiment_id(),
            name=body.name or f"{dataset.name} {now_ms():%Y-%m-%d %H:%M:%S}",
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
            created_at=now_ms(),
        )
        if body.task == "service" and not items:
            experiment = replace(experiment, status="completed", completed_at=now_ms())
        self._writer.put(project, experiment)
        return experiment, items

    def _check_judges(self, project: str, evaluators: Sequence[Evaluator]) -> None:
        """Refuse a judge whose prompt (version or label) does not exist (404), or whose
        template uses a variable a judge is not given (400 naming ``evaluators``)."""
        for index, evaluator in enumerate(evaluators):
            if evaluator.type != "llm_judge":
                continue
            row = self._prompts.resolve_version(
                project, evaluator.prompt or "", number=evaluator.version, label=evaluator.label
            )
            unknown = [v for v in template_variables(row.template) if v not in JUDGE_VARIABLES]
            if unknown:
                raise ValidationFailed(
                    "evaluators",
                    f"the judge '{evaluator.name}' (prompt '{row.name}' version {row.version}) "
                    f"uses the variable '{unknown[0]}': a judge prompt can use only "
                    f"{', '.join(JUDGE_VARIABLES)}",
                    index=index,
                    evaluator=evaluator.name,
                    variables=unknown,
                )

    def start(self, project: str, experiment: ExperimentRow, items: Sequence[ItemRow]) -> None:
        """Run a service experiment in the background, on the running event loop."""
        self._runner.start(project, experiment, items)

    # -- cancel, complete, results of the client's code -----------------------------------

    def cancel(self, project: str, experiment_id: str) -> ExperimentRow:
        """Stop a running experiment (its stored results stay); others are answered as they
        are."""
        experiment = self.get_row(project, experiment_id)
        if experiment.status != "running":
            return experiment
        stopped = replace(experiment, status="cancelled", completed_at=now_ms())
        self._writer.put(project, stopped)
        self._runner.stop(experiment_id)
        return stopped

    def complete(self, project: str, experiment_id: str) -> ExperimentRow:
        """Mark an experiment run by the client's code completed."""
        experiment = self.get_row(project, experiment_id)
        if experiment.task != "client":
            raise ValidationFailed("id", "only an experiment run by the client is completed by it")
        return self._writer.finish(project, experiment, "completed", None)

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
            rows.append(_result_row(item, result))
        rejected.sort(key=lambda r: r[0])
        self._writer.save(project, experiment, rows)
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
        figures = self._store.summary_figures(project, row.id, traced=row.task == "client")
        bounds = self._scales.of(project, [row], figures.scores, figures.booleans)
        return Computed(figures.done, figures.errors, summary_of(figures, bounds))

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
        after = self._cursors.after_time(cursor)
        rows = self._store.page(project, dataset_id, prompt_name, after, limit + 1)
        page, next_cursor = self._cursors.next_page(
            rows, limit, lambda row: time_key(row.created_at, row.id)
        )
        return [(row, self.computed(project, row)) for row in page], next_cursor

    def results_page(
        self, project: str, experiment_id: str, limit: int, cursor: str | None
    ) -> tuple[list[ResultRow], str | None]:
        """Return a page of results in item order, and the next cursor; a result of the
        client's code with no cost of its own has its trace's."""
        experiment = self.get_row(project, experiment_id)
        after = self._result_cursors.after(
            cursor, lambda p: (int(p["pos"]), str(p["item"]), int(p["rep"]))
        )
        rows = self._store.results(project, experiment_id, after, limit + 1)
        shown, next_cursor = self._result_cursors.next_page(
            rows, limit, lambda r: {"pos": r.position, "item": r.item_id, "rep": r.repetition}
        )
        if experiment.task == "client":
            shown = self._with_trace_costs(project, shown)
        return shown, next_cursor

    def _with_trace_costs(self, project: str, rows: list[ResultRow]) -> list[ResultRow]:
        """The results, each without a cost of its own given its trace's (records may reach
        the collector after their result: read now, never copied into the result)."""
        traced = [r.trace_id for r in rows if r.trace_id and not r.estimated_cost_usd]
        costs = self._store.trace_costs(project, [t for t in traced if t])
        return [
            replace(r, estimated_cost_usd=costs[r.trace_id])
            if r.trace_id in costs and not r.estimated_cost_usd
            else r
            for r in rows
        ]

    def compare(
        self, project: str, base_id: str, candidate_id: str, limit: int, cursor: str | None
    ) -> ComparePage:
        """Pair two experiments' results by item; regressions first (paged items)."""
        offset = self._comparison.offset(cursor)
        base, candidate = self.get_row(project, base_id), self.get_row(project, candidate_id)
        return self._comparison.page(project, base, candidate, offset, limit)

    # -- lifecycle -------------------------------------------------------------------------

    def recover(self) -> int:
        """Mark ``failed`` every service experiment left ``running`` by a collector that
        died (called at start-up where this process is the store's only runner)."""
        return self._runner.recover()

    def close(self) -> None:
        """Stop the experiments running here and mark them ``failed`` (their results stay)."""
        self._runner.close()


def _result_row(item: ItemRow, result: ResultIn) -> ResultRow:
    """A result the client's code posted, with its item's variables and expected output."""
    return ResultRow(
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
