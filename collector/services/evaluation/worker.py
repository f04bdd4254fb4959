"""The evaluation worker (docs/api-notes.md, "Online evaluation"; collector/services/DESIGN.md,
"Online evaluation"): a task of the collector's event loop that decides every record, trace
and session matching an enabled rule, once, and scores those it evaluates (the deciding
itself, shared with backfills, is :mod:`.deciding`'s).

It never touches the ingest route: it polls the records in the order they arrived
(``evaluation_arrivals``, filled by a view from the log's own inserts) after each rule's
durable watermark, a batch at a time, and advances the watermark only once the batch's scores
and decisions are stored. A restart, or a kill -9, resumes from the watermark; what it decides
again it decides alike (a target already decided finally is skipped, a score's id is derived
from the rule and the target).

A record is read :data:`SETTLE_SECONDS` after it arrived (an insert that began earlier may
commit a moment later). A rule with ``delay_seconds`` reads each record twice: on arrival it
writes ``waiting`` (or ``not_sampled``, final at once), and once the delay has passed the
final decision, each stage with its own watermark. A trace or a session is read with each of
its records' arrivals: ``waiting`` on arrival, decided once its newest record arrived
``idle_seconds`` ago.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio

from ...models.evaluation import RuleIn
from ...store.evaluation import DecisionStore, RuleRow
from ...store.evaluation_work import Arrival, Candidate, EvaluationWorkStore
from ..prompts import PromptService
from ..scores import ScoreService
from .deciding import Decider, Outcome, RuleState, day_start
from .evaluators import EvaluatorService
from .judging import Judges
from .targets import Target, session_target, trace_target

if TYPE_CHECKING:
    from .backfill import Backfills
    from .ownership import Ownership

logger = logging.getLogger("promptrail.evaluation")

SETTLE_SECONDS = 0.5
POLL_SECONDS = 0.5
# With no enabled rule a pass reads only the rules: it is made this often (a rule made on this
# collector wakes the worker at once, one made on another within this time).
IDLE_POLL_SECONDS = 5.0
BATCH = 500
# A disabled rule's watermarks follow the log (it judges nothing that arrived while it was
# disabled), stored at most this often.
DISABLED_STEP = timedelta(seconds=5)


# What the deciding module gives the worker's callers as before (backfills, tests).
__all__ = ["EvaluationWorker", "Outcome", "day_start"]


class EvaluationWorker(Decider):
    """Decide the records, traces and sessions matching each enabled rule, from each rule's
    watermark."""

    def __init__(
        self,
        work: EvaluationWorkStore,
        decisions: DecisionStore,
        evaluators: EvaluatorService,
        prompts: PromptService,
        scores: ScoreService,
        judges: Judges,
        settle: Callable[[str], None],
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        """``settle(project)`` waits for the project's records still written behind (the
        judges' own), before a rule's spend is summed from the log."""
        super().__init__(work, decisions, evaluators, prompts, scores, judges, settle)
        self._poll = poll_seconds
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._has_rules = False
        # The rules' backfills (set by the services' container), stopped with the worker.
        self.backfills: Backfills | None = None
        # This collector's share of the rules on a shared server (ownership.py); None: all.
        self.ownership: Ownership | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start polling, on the running event loop."""
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = self._loop.create_task(self._run())
            if self.ownership is not None:
                self.ownership.start()

    def wake(self) -> None:
        """Make the next pass now (a rule was made or changed); callable from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    async def stop(self) -> None:
        """Stop polling (a batch being decided is dropped: its watermark did not move) and
        the backfills running here."""
        if self.backfills is not None:
            await self.backfills.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.ownership is not None:  # after the last batch: its rules move at once
            await self.ownership.stop()

    async def _run(self) -> None:
        while True:
            busy = False
            try:
                busy = await self.poll_once()
            except Exception:
                logger.exception("evaluation worker pass failed; retrying")
            if not busy:
                wait = self._poll if self._has_rules else max(self._poll, IDLE_POLL_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                self._wake.clear()

    async def poll_once(self) -> bool:
        """One pass over every rule; True when some rule has more arrived records to read."""
        rules = await anyio.to_thread.run_sync(self._work.live_rules)
        self._has_rules = bool(rules)
        busy = False
        for project, row in rules:
            if self.ownership is not None and not self.ownership.owns(row.id):
                self._states.pop(row.id, None)  # its owner's now: re-read its marks if back
                continue
            try:
                busy = await self._rule(project, row) or busy
            except Exception:
                logger.exception(
                    "evaluation rule %s of project %s failed; retrying", row.id, project
                )
        return busy

    # -- one rule ---------------------------------------------------------------------------

    async def _rule(self, project: str, row: RuleRow) -> bool:
        spec = RuleIn.model_validate(row.spec)
        state = self.state(row.id)
        async with state.lock:
            if state.marks is None:
                state.marks = await anyio.to_thread.run_sync(self._work.watermarks, project, row.id)
            cutoff = datetime.now(UTC) - timedelta(seconds=SETTLE_SECONDS)
            if not spec.enabled:
                await self._follow(project, row, state, cutoff)
                return False
            busy = False
            if spec.target in ("trace", "session"):
                busy = await self._thread_stage(project, row, spec, state, "seen", cutoff)
                quiet = cutoff - timedelta(seconds=spec.idle_seconds)
                return await self._thread_stage(project, row, spec, state, "due", quiet) or busy
            if spec.delay_seconds > 0:
                busy = await self._stage(project, row, spec, state, "seen", cutoff)
            due = cutoff - timedelta(seconds=spec.delay_seconds)
            return await self._stage(project, row, spec, state, "due", due) or busy

    async def _follow(self, project: str, row: RuleRow, state: RuleState, cutoff: datetime) -> None:
        assert state.marks is not None
        for stage in ("seen", "due"):
            mark = state.marks.get(stage, (row.created_at, ""))
            if mark[0] < cutoff - DISABLED_STEP:
                await anyio.to_thread.run_sync(
                    self._work.advance, project, row.id, stage, (cutoff, "")
                )
                state.marks[stage] = (cutoff, "")

    async def _stage(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        state: RuleState,
        stage: str,
        until: datetime,
    ) -> bool:
        assert state.marks is not None
        after = state.marks.get(stage, (row.created_at, ""))
        arrivals: list[Arrival] = await anyio.to_thread.run_sync(
            self._work.arrivals, project, after, until, BATCH
        )
        if not arrivals:
            return False
        records = await anyio.to_thread.run_sync(
            self._work.candidates, project, [(a.created_at, a.id) for a in arrivals]
        )
        by_id = {r.id: r for r in records}
        ordered = [by_id[i] for i in dict.fromkeys(a.id for a in arrivals) if i in by_id]
        outcome = await self.decide(project, row, spec, ordered, waiting=stage == "seen")
        await anyio.to_thread.run_sync(self.store, project, outcome)
        last = (arrivals[-1].arrived_at, arrivals[-1].id)
        await anyio.to_thread.run_sync(self._work.advance, project, row.id, stage, last)
        state.marks[stage] = last
        return len(arrivals) == BATCH

    async def _thread_stage(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        state: RuleState,
        stage: str,
        until: datetime,
    ) -> bool:
        """A trace or a session (the rule's target) is read with each of its records'
        arrivals; on arrival (``seen``) it gets ``waiting`` (or ``not_sampled``), and it is
        decided at its newest record's arrival once that is ``idle_seconds`` old (an earlier
        record's arrival leaves it to the newest's)."""
        assert state.marks is not None
        after = state.marks.get(stage, (row.created_at, ""))
        arrivals: list[Arrival] = await anyio.to_thread.run_sync(
            self._work.arrivals, project, after, until, BATCH
        )
        if not arrivals:
            return False
        key = "trace_id" if spec.target == "trace" else "session_id"
        ids = sorted({getattr(a, key) for a in arrivals} - {""})
        if stage == "due" and ids:
            newest = await anyio.to_thread.run_sync(self._work.last_arrivals, project, ids, key)
            ids = [t for t in ids if newest.get(t, until) <= until]
        targets = await self.thread_targets(project, spec, ids)
        outcome = await self.decide_targets(project, row, spec, targets, waiting=stage == "seen")
        await anyio.to_thread.run_sync(self.store, project, outcome)
        last = (arrivals[-1].arrived_at, arrivals[-1].id)
        await anyio.to_thread.run_sync(self._work.advance, project, row.id, stage, last)
        state.marks[stage] = last
        return len(arrivals) == BATCH

    async def thread_targets(self, project: str, spec: RuleIn, ids: list[str]) -> list[Target]:
        """The traces or sessions (the rule's target) of ``ids`` that match the rule, read
        whole, as the rule's targets (the live path's and a backfill's)."""
        key = "trace_id" if spec.target == "trace" else "session_id"
        grouped = await anyio.to_thread.run_sync(self._thread_records, project, key, ids)
        label_version = await self._label_version(project, spec)
        make = trace_target if spec.target == "trace" else session_target
        found = (make(spec, k, grouped.get(k, []), label_version) for k in ids)
        return [t for t in found if t is not None]

    def _thread_records(self, project: str, key: str, ids: list[str]) -> dict[str, list[Candidate]]:
        """The live records of these traces or sessions (``key``), by trace or session."""
        if key == "session_id":
            return self._work.session_candidates(project, ids)
        grouped: dict[str, list[Candidate]] = {}
        for record in self._work.trace_candidates(project, ids):
            grouped.setdefault(record.trace_id, []).append(record)
        return grouped
