"""Backfills (docs/api-notes.md, "Online evaluation"): a rule run on the records created in a
past window, as a job with progress, deciding exactly as the live path does (the worker's own
:meth:`~.worker.EvaluationWorker.decide`: the same sample, the same score ids, the same rate
and budget), and evaluating again a target the rule already decided (its score replaced).

A job lives in the collector that runs it: its progress is on the rule's GET there
(``backfill``: ``running``, then ``completed`` or ``failed``); a collector that stops ends it
(run it again: it decides alike).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio

from ...errors import ValidationFailed
from ...store.evaluation import RuleRow
from ...store.evaluation_work import EvaluationWorkStore
from .rules import Rule, RuleService
from .worker import EvaluationWorker

logger = logging.getLogger("promptrail.evaluation")

BATCH = 500


@dataclass
class Job:
    """A backfill's progress: records of the window read so far, of ``total``."""

    status: str
    done: int
    total: int

    def as_json(self) -> dict[str, Any]:
        """The job as the rule's GET shows it."""
        return {"status": self.status, "done": self.done, "total": self.total}


class Backfills:
    """Start backfills and tell their progress."""

    def __init__(
        self, worker: EvaluationWorker, work: EvaluationWorkStore, rules: RuleService
    ) -> None:
        self._worker = worker
        self._work = work
        self._rules = rules
        self._jobs: dict[tuple[str, str], Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def status(self, project: str, rule_id: str) -> dict[str, Any] | None:
        """The rule's newest backfill here, or None."""
        job = self._jobs.get((project, rule_id))
        return None if job is None else job.as_json()

    async def start(self, project: str, rule_id: str, since: datetime, until: datetime) -> Job:
        """Start a backfill of the records created in [since, until); return its job."""
        rule: Rule = await anyio.to_thread.run_sync(self._rules.live, project, rule_id)
        if until <= since:
            raise ValidationFailed("to", "to must come after from")
        if rule.spec.target != "record":
            raise ValidationFailed(
                "target", "only rules judging records can be backfilled in this version"
            )
        running = self._jobs.get((project, rule_id))
        if running is not None and running.status == "running":
            raise ValidationFailed("id", "a backfill of this rule is running: wait for its end")
        total = await anyio.to_thread.run_sync(self._work.count_between, project, since, until)
        job = Job("running", 0, total)
        self._jobs[(project, rule_id)] = job
        task = asyncio.get_running_loop().create_task(self._run(project, rule, since, until, job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(
        self, project: str, rule: Rule, since: datetime, until: datetime, job: Job
    ) -> None:
        row = RuleRow(rule.id, rule.spec.model_dump(mode="json"), rule.created_at, rule.updated_at)
        after = ""
        try:
            while True:
                keys = await anyio.to_thread.run_sync(
                    self._work.created_between, project, since, until, after, BATCH
                )
                if not keys:
                    break
                records = await anyio.to_thread.run_sync(self._work.candidates, project, keys)
                outcome = await self._worker.decide(project, row, rule.spec, records, again=True)
                await anyio.to_thread.run_sync(self._worker.store, project, outcome)
                job.done += len(keys)
                after = keys[-1][1]
            job.done = max(job.done, job.total)
            job.total = job.done
            job.status = "completed"
        except Exception:
            logger.exception("backfill of rule %s failed", rule.id)
            job.status = "failed"

    async def stop(self) -> None:
        """End the backfills running here (each marked ``failed``)."""
        for task in list(self._tasks):
            task.cancel()
        for (_, _), job in self._jobs.items():
            if job.status == "running":
                job.status = "failed"
