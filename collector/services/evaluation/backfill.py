"""Backfills (docs/api-notes.md, "Online evaluation"): a rule run on the records created in a
past window (a trace or session rule: on the traces or sessions with a record created
there), as a job with progress, deciding exactly as the live path does (the worker's own
:meth:`~.deciding.Decider.decide` and :meth:`~.worker.EvaluationWorker.thread_targets`: the
same sample, the same score ids, the same rate and budget), and evaluating again a target the
rule already decided (its score replaced).

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
# Traces or sessions a batch reads (each whole: several records).
THREADS = 100
# What keys a rule's target in the log, when it is no record.
_KEYS = {"trace": "trace_id", "session": "session_id"}


@dataclass
class Job:
    """A backfill's progress: records (traces, sessions) of the window read so far, of
    ``total``."""

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
        """Start a backfill of the records (traces, sessions with a record) created in
        [since, until); return its job."""
        rule: Rule = await anyio.to_thread.run_sync(self._rules.live, project, rule_id)
        if until <= since:
            raise ValidationFailed("to", "to must come after from")
        running = self._jobs.get((project, rule_id))
        if running is not None and running.status == "running":
            raise ValidationFailed("id", "a backfill of this rule is running: wait for its end")
        key = _KEYS.get(rule.spec.target)
        if key is None:
            total = await anyio.to_thread.run_sync(self._work.count_between, project, since, until)
        else:
            total = await anyio.to_thread.run_sync(
                self._work.count_threads_between, project, key, since, until
            )
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
        key = _KEYS.get(rule.spec.target)
        try:
            while True:
                if key is None:
                    keys = await anyio.to_thread.run_sync(
                        self._work.created_between, project, since, until, after, BATCH
                    )
                    if not keys:
                        break
                    records = await anyio.to_thread.run_sync(self._work.candidates, project, keys)
                    outcome = await self._worker.decide(
                        project, row, rule.spec, records, again=True
                    )
                    read, after = len(keys), keys[-1][1]
                else:
                    ids = await anyio.to_thread.run_sync(
                        self._work.threads_between, project, key, since, until, after, THREADS
                    )
                    if not ids:
                        break
                    targets = await self._worker.thread_targets(project, rule.spec, ids)
                    outcome = await self._worker.decide_targets(
                        project, row, rule.spec, targets, again=True
                    )
                    read, after = len(ids), ids[-1]
                await anyio.to_thread.run_sync(self._worker.store, project, outcome)
                job.done += read
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
