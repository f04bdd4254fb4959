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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from ...models.evaluation import RuleIn
from ...store.evaluation import DecisionStore, RuleRow
from ...store.evaluation_work import Arrival, Candidate, EvaluationWorkStore, Position
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
# A project whose last pass read full batches reads this many at a time (fewer, larger
# writes per decision while a backlog lasts; a batch's scores are written in parts the
# score service takes).
BACKLOG_BATCH = 2000
# A disabled rule's watermarks follow the log (it judges nothing that arrived while it was
# disabled), stored at most this often.
DISABLED_STEP = timedelta(seconds=5)
_FAILED = "evaluation rule %s of project %s failed; retrying"


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
        # The projects whose last pass read a full batch (the next reads larger ones).
        self._backlog: set[str] = set()
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
        by_project: dict[str, list[RuleRow]] = {}
        for project, row in rules:
            if self.ownership is not None and not self.ownership.owns(row.id):
                self._states.pop(row.id, None)  # its owner's now: re-read its marks if back
                continue
            by_project.setdefault(project, []).append(row)
        busy = False
        for project, rows in by_project.items():
            try:
                busy = await self._project(project, rows) or busy
            except Exception:
                logger.exception("evaluation pass of project %s failed; retrying", project)
        return busy

    # -- one project's rules ----------------------------------------------------------------

    async def _project(self, project: str, rows: list[RuleRow]) -> bool:
        """One pass over a project's rules: each stage's arrivals and records are read once
        for every rule at the same watermark, and the pass's decisions and scores are
        written in one insert each (per phase), every rule's watermark moved after them."""
        cutoff = datetime.now(UTC) - timedelta(seconds=SETTLE_SECONDS)
        async with contextlib.AsyncExitStack() as held:
            held.enter_context(self.remembering())
            live: list[tuple[RuleRow, RuleIn, RuleState]] = []
            for row in rows:
                try:
                    spec = RuleIn.model_validate(row.spec)
                    state = self.state(row.id)
                    await held.enter_async_context(state.lock)
                    if state.marks is None:
                        state.marks = await anyio.to_thread.run_sync(
                            self._work.watermarks, project, row.id
                        )
                    if not spec.enabled:
                        await self._follow(project, row, state, cutoff)
                        continue
                except Exception:
                    logger.exception(_FAILED, row.id, project)
                    continue
                live.append((row, spec, state))
            work = _Pass(project, BACKLOG_BATCH if project in self._backlog else BATCH)
            busy = False
            # A delayed rule's or a thread rule's arrival decisions are stored before its
            # final ones are read for (a final decision looks up what the target got).
            for phase in ("seen", "due"):
                work.starts = {}
                for row, spec, state in live:
                    until = _until(spec, phase, cutoff)
                    if until is not None:
                        assert state.marks is not None
                        mark = state.marks.get(phase, (row.created_at, ""))
                        start = work.starts.get((phase, until), mark)
                        work.starts[(phase, until)] = min(start, mark)
                # Judges' rules run beside the others, whose outcomes are stored as soon as
                # they are decided (a code rule's scores do not wait for a judge's calls).
                judged = [phase == "due" and await self._judged(project, s) for _, s, _ in live]
                slow: list[asyncio.Task[bool]] = []
                fast: list[Awaitable[bool]] = []
                for (row, spec, state), by_judge in zip(live, judged, strict=True):
                    job = self._phase(work, row, spec, state, phase, cutoff)
                    if by_judge:
                        slow.append(asyncio.ensure_future(job))
                    else:
                        fast.append(job)
                try:
                    busy = any(await asyncio.gather(*fast)) or busy
                    await self._flush(work)
                    busy = any(await asyncio.gather(*slow)) or busy
                finally:
                    for task in slow:  # a failed write ends the pass: its judges too
                        task.cancel()
                await self._flush(work)
            if busy:
                self._backlog.add(project)
            else:
                self._backlog.discard(project)
            return busy

    async def _judged(self, project: str, spec: RuleIn) -> bool:
        """Whether the rule's evaluator calls a judge (its decisions take the calls' time)."""
        try:
            evaluator, _, _ = await self._evaluator(project, spec)
        except Exception:
            return False  # decided (as an error) with the others
        return evaluator is not None and evaluator.type == "llm_judge"

    async def _phase(
        self,
        work: _Pass,
        row: RuleRow,
        spec: RuleIn,
        state: RuleState,
        phase: str,
        cutoff: datetime,
    ) -> bool:
        until = _until(spec, phase, cutoff)
        if until is None:
            return False
        try:
            if spec.target in ("trace", "session"):
                return await self._thread_stage(work, row, spec, state, phase, until)
            return await self._stage(work, row, spec, state, phase, until)
        except Exception:
            logger.exception(_FAILED, row.id, work.project)
            return False

    async def _flush(self, work: _Pass) -> None:
        """Store what the pass decided, then move its rules' watermarks (a crash between
        them decides those targets again, alike; never skips one)."""
        outcome, marks = work.outcome, work.marks
        work.outcome, work.marks = Outcome(), []
        if outcome.decisions or outcome.scores:
            await anyio.to_thread.run_sync(self.store, work.project, outcome)
        if marks:
            await anyio.to_thread.run_sync(
                self._work.advance_many,
                work.project,
                [(rule_id, stage, position) for _, rule_id, stage, position in marks],
            )
            for state, _, stage, position in marks:
                assert state.marks is not None
                state.marks[stage] = position

    async def _follow(self, project: str, row: RuleRow, state: RuleState, cutoff: datetime) -> None:
        assert state.marks is not None
        for stage in ("seen", "due"):
            mark = state.marks.get(stage, (row.created_at, ""))
            if mark[0] < cutoff - DISABLED_STEP:
                await anyio.to_thread.run_sync(
                    self._work.advance, project, row.id, stage, (cutoff, "")
                )
                state.marks[stage] = (cutoff, "")

    async def _arrivals(
        self, work: _Pass, row: RuleRow, state: RuleState, stage: str, until: datetime
    ) -> tuple[tuple[object, ...], list[Arrival], list[Arrival]]:
        """The stage's next arrivals after the rule's watermark, with the key and the
        answer of the read they came from (its length saying whether more arrived).

        One read serves the pass's rules of that stage and ``until``: from the earliest of
        their watermarks, each rule taking those after its own (a prefix of its next
        arrivals; all of them up to ``until`` unless the read was full). A rule ahead of a
        full read reads from its own watermark."""
        assert state.marks is not None
        after = state.marks.get(stage, (row.created_at, ""))
        start = work.starts.get((stage, until), after)
        for begin in dict.fromkeys((start, after)):
            key: tuple[object, ...] = ("arrivals", begin, until, work.limit)
            found: list[Arrival] = await work.read(
                key, self._work.arrivals, work.project, begin, until, work.limit
            )
            mine = [a for a in found if (a.arrived_at, a.id) > after]
            if mine or len(found) < work.limit:
                return key, found, mine
        return key, found, []

    async def _stage(
        self,
        work: _Pass,
        row: RuleRow,
        spec: RuleIn,
        state: RuleState,
        stage: str,
        until: datetime,
    ) -> bool:
        key, read, arrivals = await self._arrivals(work, row, state, stage, until)
        if not arrivals:
            return False
        keys = [(a.created_at, a.id) for a in read]
        records: list[Candidate] = await work.read(
            ("records", *key), self._work.candidates, work.project, keys
        )
        by_id = {r.id: r for r in records}
        ordered = [by_id[i] for i in dict.fromkeys(a.id for a in arrivals) if i in by_id]
        outcome = await self.decide(work.project, row, spec, ordered, waiting=stage == "seen")
        work.add(outcome, state, row.id, stage, (arrivals[-1].arrived_at, arrivals[-1].id))
        return len(read) == work.limit

    async def _thread_stage(
        self,
        work: _Pass,
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
        project = work.project
        _, read, arrivals = await self._arrivals(work, row, state, stage, until)
        if not arrivals:
            return False
        key = "trace_id" if spec.target == "trace" else "session_id"
        ids = sorted({getattr(a, key) for a in arrivals} - {""})
        if stage == "due" and ids:
            newest = await anyio.to_thread.run_sync(self._work.last_arrivals, project, ids, key)
            ids = [t for t in ids if newest.get(t, until) <= until]
        targets = await self.thread_targets(project, spec, ids)
        outcome = await self.decide_targets(project, row, spec, targets, waiting=stage == "seen")
        work.add(outcome, state, row.id, stage, (arrivals[-1].arrived_at, arrivals[-1].id))
        return len(read) == work.limit

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


@dataclass
class _Pass:
    """One pass over a project's rules: the reads its rules share (each made once, by the
    first rule asking), and the decisions, scores and watermarks not yet stored."""

    project: str
    limit: int
    reads: dict[tuple[object, ...], asyncio.Future[Any]] = field(default_factory=dict)
    # Where each (stage, until) read of the phase begins: its rules' earliest watermark.
    starts: dict[tuple[str, datetime], Position] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    marks: list[tuple[RuleState, str, str, Position]] = field(default_factory=list)

    async def read(self, key: tuple[object, ...], fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a thread, once per pass for ``key``."""
        found = self.reads.get(key)
        if found is None:
            found = self.reads[key] = asyncio.ensure_future(_on_thread(fn, *args))
        return await asyncio.shield(found)

    def add(
        self, outcome: Outcome, state: RuleState, rule_id: str, stage: str, last: Position
    ) -> None:
        """A rule's stage decided up to ``last``: stored with the pass's next write."""
        self.outcome.decisions.extend(outcome.decisions)
        self.outcome.scores.extend(outcome.scores)
        self.marks.append((state, rule_id, stage, last))


def _on_thread(fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
    return anyio.to_thread.run_sync(fn, *args)


def _until(spec: RuleIn, phase: str, cutoff: datetime) -> datetime | None:
    """How late an arrival the rule's ``phase`` reads up to in a pass at ``cutoff``; None
    when the rule has no such phase (a record rule without delay decides on arrival)."""
    if spec.target in ("trace", "session"):
        return cutoff if phase == "seen" else cutoff - timedelta(seconds=spec.idle_seconds)
    if phase == "seen":
        return cutoff if spec.delay_seconds > 0 else None
    return cutoff - timedelta(seconds=spec.delay_seconds)
