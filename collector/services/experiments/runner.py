"""The job that runs an experiment on the service: each repetition of each item is one run
(see :mod:`..runs`), at most ``concurrency`` at once, in a task of the collector's event loop.

A run's record carries ``metadata.experiment_id`` and ``metadata.dataset_item_id``; each
result is handed to :class:`.results.ResultWriter` the moment it is done. A provider failure,
or an item lacking a variable the template needs, makes that result an error and the others
run on. A collector that stops while an experiment runs marks it ``failed`` on its way down,
and one that starts again on an embedded store (where it is the store's only runner) marks
any experiment still ``running`` ``failed`` (its process died): the results already stored
stay, nothing is resumed (see docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from promptrail._evaluators import evaluate_simple, judge_value

from ...errors import ContractError, UpstreamProviderFailed
from ...models.requests import EXPERIMENT_ENVIRONMENT
from ...models.runs import RunRequest
from ...store.datasets import ItemRow
from ...store.experiments import ExperimentRow, ExperimentStore, ResultRow
from ...store.request_rows import RequestRow
from ..evaluators import Evaluator, parse_evaluators
from ..runs import RecordKeeper, RunService, RunTarget
from .results import ResultWriter, now_ms

logger = logging.getLogger("promptrail.experiments")

STOPPED = "the collector stopped while the experiment ran"
# What a judge prompt is rendered with: a template using any other variable is refused when
# the experiment is created (see docs/api-notes.md, "Datasets and experiments").
JUDGE_VARIABLES = ("input", "output", "expected_output")
# Experiments running in this process, by any collector of it (several collectors of one
# process may share an embedded store: a start-up must not fail what another one runs).
_RUNNING_HERE: set[str] = set()


class ExperimentRunner:
    """Run service experiments in the background; stop them; fail the ones a dead
    collector left running."""

    def __init__(self, store: ExperimentStore, runs: RunService, writer: ResultWriter) -> None:
        self._store = store
        self._runs = runs
        self._writer = writer
        self._tasks: dict[str, tuple[str, asyncio.Task[None]]] = {}
        # Per running experiment, how often a judge failed and the first reason (the note
        # its end carries).
        self._judge_failures: dict[str, tuple[int, str]] = {}

    def start(self, project: str, experiment: ExperimentRow, items: Sequence[ItemRow]) -> None:
        """Run a service experiment in the background, on the running event loop."""
        if experiment.task != "service" or experiment.status != "running":
            return
        task = asyncio.get_running_loop().create_task(self._run(project, experiment, items))
        self._tasks[experiment.id] = (project, task)
        _RUNNING_HERE.add(experiment.id)

        def forget(_: asyncio.Task[None]) -> None:
            self._tasks.pop(experiment.id, None)
            self._judge_failures.pop(experiment.id, None)
            _RUNNING_HERE.discard(experiment.id)

        task.add_done_callback(forget)

    def stop(self, experiment_id: str) -> None:
        """Cancel an experiment's job if it runs here (from any thread)."""
        running = self._tasks.get(experiment_id)
        if running is not None:
            running[1].get_loop().call_soon_threadsafe(running[1].cancel)

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
            failed = replace(row, status="failed", spec=spec, completed_at=now_ms())
            self._writer.put(project, failed)
        return len(stale)

    def close(self) -> None:
        """Stop the experiments running here and mark them ``failed`` (their results stay)."""
        for experiment_id, (project, task) in list(self._tasks.items()):
            task.cancel()
            try:
                row = self._store.get(project, experiment_id)
                if row is not None:
                    self._writer.finish(project, row, "failed", STOPPED)
            except Exception:
                logger.exception("experiment %s not marked failed", experiment_id)
        self._tasks.clear()

    # -- the job ---------------------------------------------------------------------------

    async def _run(self, project: str, experiment: ExperimentRow, items: Sequence[ItemRow]) -> None:
        evaluators = parse_evaluators(experiment.spec["evaluators"])
        gate = asyncio.Semaphore(int(experiment.spec["concurrency"]))
        repetitions = int(experiment.spec["repetitions"])
        done: list[ResultRow] = []
        # The finished runs' records, stored with their results in the writer's batch.
        records: list[RequestRow] = []
        writing = False
        save = self._writer.save

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
                    await anyio.to_thread.run_sync(save, project, experiment, batch, kept)
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
                await anyio.to_thread.run_sync(save, project, experiment, done[:], records[:])
            elif records:
                # Their results are lost with the writer; the records are not.
                self._runs.store_later(project, records[:])
            raise
        except BaseException:
            logger.exception("experiment %s failed", experiment.id)
            if records:
                self._runs.store_later(project, records[:])  # runs made: their records stay
            await anyio.to_thread.run_sync(
                self._writer.finish, project, experiment, "failed", "internal error; see the log"
            )
            return
        note = self._judge_note(experiment.id)
        await anyio.to_thread.run_sync(self._writer.finish, project, experiment, "completed", note)

    def _judge_note(self, experiment_id: str) -> str | None:
        """What a completed experiment's ``error`` says when judges failed on its results."""
        failures = self._judge_failures.pop(experiment_id, None)
        if failures is None:
            return None
        return (
            f"a judge failed {failures[0]} time(s): those results are errors (counted in "
            f"counts.errors); the first: {failures[1]}"
        )

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
            run = await self._runs.prepare(project, target, body, admit=False)
            run = self._runs.retarget(run, experiment.model, experiment.spec.get("parameters"))
            # The connection's budget and base URL, checked for the model actually called.
            await self._runs.admit(run)
            # Experiment traffic is the service's own: hidden from the production views.
            run = replace(run, environment=EXPERIMENT_ENVIRONMENT)
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
        failed: list[str] = []
        for evaluator in evaluators:
            if evaluator.type == "llm_judge":
                verdict = await self._judge(project, experiment, evaluator, item, answer)
                value, judge_cost = verdict.value, judge_cost + verdict.cost_usd
                if verdict.error is not None:
                    failed.append(verdict.error)
            else:
                value = evaluate_simple(
                    evaluator.type, answer.output, item.expected_output, evaluator.pattern
                )
            if value is not None:
                scores[evaluator.name] = value
        # A judge that could not give its verdict makes the result an error (counted in
        # counts.errors): the output and the other verdicts stay.
        return replace(
            base,
            request_id=answer.id,
            output=answer.output,
            status="error" if failed else "success",
            error="; ".join(failed),
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
    ) -> JudgeVerdict:
        """Run the judge prompt on one output; return its score (None: no verdict), its cost,
        or why the judge could not run."""
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
            reply = await self._runs.complete(replace(run, environment=EXPERIMENT_ENVIRONMENT))
        except ContractError as exc:
            # Its prompt is gone or changed since the experiment was created (a template
            # using other variables is refused then), or its provider failed (the judge's
            # record says more).
            problem = _judge_error(exc)
        except Exception as exc:
            logger.exception("judge %s of experiment %s failed", evaluator.name, experiment.id)
            problem = f"internal error: {type(exc).__name__}"
        else:
            value = judge_value(reply.output, evaluator.categories)
            return JudgeVerdict(value, reply.usage.estimated_cost_usd)
        error = f"judge '{evaluator.name}' failed: {problem}"
        count, first = self._judge_failures.get(experiment.id, (0, error))
        self._judge_failures[experiment.id] = (count + 1, first)
        return JudgeVerdict(None, 0.0, error)


@dataclass(frozen=True)
class JudgeVerdict:
    """What one judge said of one output."""

    value: float | None
    cost_usd: float
    error: str | None = None


def _judge_error(exc: ContractError) -> str:
    missing = exc.details.get("missing_variables")
    if missing:
        return (
            f"its prompt uses {', '.join(missing)}, but a judge is given only "
            f"{', '.join(JUDGE_VARIABLES)}"
        )
    return exc.message


def _error_text(exc: ContractError) -> str:
    missing = exc.details.get("missing_variables")
    if missing:
        return f"the item lacks variables the template needs: {', '.join(missing)}"
    return exc.message
