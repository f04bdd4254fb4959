"""The evaluation worker (docs/api-notes.md, "Online evaluation"; collector/services/DESIGN.md,
"Online evaluation"): a task of the collector's event loop that decides every record matching
an enabled rule, once, and scores those it evaluates.

It never touches the ingest route: it polls the records in the order they arrived
(``evaluation_arrivals``, filled by a view from the log's own inserts) after each rule's
durable watermark, a batch at a time, and advances the watermark only once the batch's scores
and decisions are stored. A restart, or a kill -9, resumes from the watermark; what it decides
again it decides alike (a target already decided finally is skipped, a score's id is derived
from the rule and the target).

A record is read :data:`SETTLE_SECONDS` after it arrived (an insert that began earlier may
commit a moment later). A rule with ``delay_seconds`` reads each record twice: on arrival it
writes ``waiting`` (or ``not_sampled``, final at once), and once the delay has passed the
final decision, each stage with its own watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from ...errors import ContractError
from ...models.evaluation import RuleIn
from ...store.evaluation import DecisionRow, DecisionStore, RuleRow
from ...store.evaluation_work import Arrival, Candidate, EvaluationWorkStore, Position
from ...store.writes import Refused
from ..evaluators import Evaluator, parse_evaluators
from ..prompts import PromptService
from ..scores import ScoreService
from .evaluators import EvaluatorService
from .judging import Judges, Verdict, run_code, score_id
from .sampling import in_sample
from .targets import Target, mapped, matches, trace_target

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
JUDGES_AT_ONCE = 8
RESUM_SECONDS = 60.0
# A disabled rule's watermarks follow the log (it judges nothing that arrived while it was
# disabled), stored at most this often.
DISABLED_STEP = timedelta(seconds=5)


@dataclass
class _RuleState:
    """What the worker keeps in memory per rule: its watermarks, token bucket and spend."""

    marks: dict[str, Position] | None = None
    tokens: float | None = None
    filled_at: float = 0.0
    day: datetime | None = None
    spent: float = 0.0
    summed_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Outcome:
    """A batch's decisions and the scores they write."""

    decisions: list[DecisionRow] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)


def day_start(now: datetime) -> datetime:
    """The first instant of ``now``'s day, UTC."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class EvaluationWorker:
    """Decide the records matching each enabled rule, from each rule's watermark."""

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
        self._work = work
        self._decisions = decisions
        self._evaluators = evaluators
        self._prompts = prompts
        self._scores = scores
        self._judges = judges
        self._settle = settle
        self._poll = poll_seconds
        self._states: dict[str, _RuleState] = {}
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

    def state(self, rule_id: str) -> _RuleState:
        """The worker's memory of a rule."""
        return self._states.setdefault(rule_id, _RuleState())

    async def _rule(self, project: str, row: RuleRow) -> bool:
        spec = RuleIn.model_validate(row.spec)
        if spec.target == "session":
            return False  # sessions are not judged yet (docs/api-notes.md)
        state = self.state(row.id)
        async with state.lock:
            if state.marks is None:
                state.marks = await anyio.to_thread.run_sync(self._work.watermarks, project, row.id)
            cutoff = datetime.now(UTC) - timedelta(seconds=SETTLE_SECONDS)
            if not spec.enabled:
                await self._follow(project, row, state, cutoff)
                return False
            busy = False
            if spec.target == "trace":
                busy = await self._trace_stage(project, row, spec, state, "seen", cutoff)
                quiet = cutoff - timedelta(seconds=spec.idle_seconds)
                return await self._trace_stage(project, row, spec, state, "due", quiet) or busy
            if spec.delay_seconds > 0:
                busy = await self._stage(project, row, spec, state, "seen", cutoff)
            due = cutoff - timedelta(seconds=spec.delay_seconds)
            return await self._stage(project, row, spec, state, "due", due) or busy

    async def _follow(
        self, project: str, row: RuleRow, state: _RuleState, cutoff: datetime
    ) -> None:
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
        state: _RuleState,
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

    async def _trace_stage(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        state: _RuleState,
        stage: str,
        until: datetime,
    ) -> bool:
        """A trace is read with each of its records' arrivals; on arrival (``seen``) it gets
        ``waiting`` (or ``not_sampled``), and it is decided at its newest record's arrival
        once that is ``idle_seconds`` old (an earlier record's arrival leaves it to the
        newest's)."""
        assert state.marks is not None
        after = state.marks.get(stage, (row.created_at, ""))
        arrivals: list[Arrival] = await anyio.to_thread.run_sync(
            self._work.arrivals, project, after, until, BATCH
        )
        if not arrivals:
            return False
        traces = sorted({a.trace_id for a in arrivals if a.trace_id})
        if stage == "due" and traces:
            newest = await anyio.to_thread.run_sync(self._work.last_arrivals, project, traces)
            traces = [t for t in traces if newest.get(t, until) <= until]
        records = await anyio.to_thread.run_sync(self._work.trace_candidates, project, traces)
        by_trace: dict[str, list[Candidate]] = {}
        for record in records:
            by_trace.setdefault(record.trace_id, []).append(record)
        label_version = await self._label_version(project, spec)
        targets = [
            t
            for t in (trace_target(spec, k, by_trace.get(k, []), label_version) for k in traces)
            if t is not None
        ]
        outcome = await self.decide_targets(project, row, spec, targets, waiting=stage == "seen")
        await anyio.to_thread.run_sync(self.store, project, outcome)
        last = (arrivals[-1].arrived_at, arrivals[-1].id)
        await anyio.to_thread.run_sync(self._work.advance, project, row.id, stage, last)
        state.marks[stage] = last
        return len(arrivals) == BATCH

    # -- deciding (the live path and backfills alike) ---------------------------------------

    async def decide(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        records: Sequence[Candidate],
        waiting: bool = False,
        again: bool = False,
    ) -> Outcome:
        """Decide the records of ``records`` matching the rule (see :meth:`decide_targets`)."""
        label_version = await self._label_version(project, spec)
        targets = [
            Target("record", r.id, mapped(spec, r))
            for r in records
            if matches(spec, r, label_version)
        ]
        return await self.decide_targets(project, row, spec, targets, waiting, again)

    async def decide_targets(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        targets: Sequence[Target],
        waiting: bool = False,
        again: bool = False,
    ) -> Outcome:
        """Decide targets matching the rule: on arrival (``waiting``) only ``waiting`` or
        ``not_sampled``; else finally. A target the rule already decided finally is skipped
        unless ``again`` (a backfill evaluates again)."""
        if not targets:
            return Outcome()
        prior = await anyio.to_thread.run_sync(
            self._work.decided, project, row.id, targets[0].type, [t.id for t in targets]
        )
        todo = [
            t
            for t in targets
            if again or prior.get(t.id) is None or (prior[t.id] == "waiting" and not waiting)
        ]
        outcome = Outcome()
        if not todo:
            return outcome
        if waiting:
            for target in todo:
                sampled = in_sample(row.id, target.id, spec.sampling)
                outcome.decisions.append(
                    self._row(row, spec, target, *_arrival_decision(spec, target.type, sampled))
                )
            return outcome
        evaluator, version, problem = await self._evaluator(project, spec)
        state = self.state(row.id)
        gate = asyncio.Semaphore(
            1 if spec.daily_budget_usd is not None or evaluator is None else JUDGES_AT_ONCE
        )

        async def one(target: Target) -> tuple[Target, Verdict]:
            async with gate:
                return target, await self._verdict(
                    project, row, spec, state, evaluator, problem, target
                )

        for target, verdict in await asyncio.gather(*(one(t) for t in todo)):
            sid = None
            if verdict.decision == "scored":
                sid = score_id(row.id, target.id)
                on = "request_id" if target.type == "record" else "trace_id"
                outcome.scores.append(
                    {
                        "id": sid,
                        on: target.id,
                        "name": spec.score_name or spec.evaluator,
                        "value": verdict.value,
                        "source": "eval",
                        "metadata": {
                            "rule_id": row.id,
                            "evaluator": spec.evaluator,
                            "evaluator_version": version,
                        },
                    }
                )
            outcome.decisions.append(
                self._row(
                    row,
                    spec,
                    target,
                    verdict.decision,
                    verdict.reason,
                    version,
                    score=sid,
                    judge_request_id=verdict.judge_request_id,
                    cost=verdict.cost_usd,
                )
            )
        return outcome

    async def _verdict(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        state: _RuleState,
        evaluator: Evaluator | None,
        problem: str,
        target: Target,
    ) -> Verdict:
        if not in_sample(row.id, target.id, spec.sampling):
            return Verdict(decision="not_sampled", reason=_outside(spec))
        if evaluator is None:
            return Verdict(decision="error", reason=problem)
        if spec.daily_budget_usd is not None:
            spent = await self._spent(project, row.id, state)
            if spent >= spec.daily_budget_usd:
                return Verdict(
                    decision="budget_exhausted",
                    reason=f"spent {spent:.6f} USD today (UTC) of a daily budget of "
                    f"{spec.daily_budget_usd} USD",
                )
        if spec.max_per_minute is not None and not _take(state, spec.max_per_minute):
            return Verdict(
                decision="rate_limited",
                reason=f"over the rule's {spec.max_per_minute} evaluations a minute",
            )
        if evaluator.type != "llm_judge":
            return run_code(evaluator, target.given)
        verdict = await self._judges.judge(project, row.id, evaluator, target.id, target.given)
        if verdict.cost_usd:
            state.spent += verdict.cost_usd
        return verdict

    def store(self, project: str, outcome: Outcome) -> None:
        """Store a batch's scores, then its decisions (a score the store will not take
        makes its decision an ``error`` naming why); raise when the store refuses."""
        if outcome.scores:
            _, rejected = self._scores.batch(project, outcome.scores)
            failed = {outcome.scores[i]["id"]: error.get("message", "") for i, error in rejected}
            if failed:
                outcome.decisions = [
                    _failed(d, failed[d.score_id]) if d.score_id in failed else d
                    for d in outcome.decisions
                ]
        written = self._decisions.append(project, outcome.decisions)
        if isinstance(written, Refused):
            raise RuntimeError(f"decisions not stored: {written.message}")

    # -- helpers ----------------------------------------------------------------------------

    def _row(
        self,
        row: RuleRow,
        spec: RuleIn,
        target: Target,
        decision: str,
        reason: str,
        version: int,
        score: str | None = None,
        judge_request_id: str | None = None,
        cost: float | None = None,
    ) -> DecisionRow:
        return DecisionRow(
            rule_id=row.id,
            target_type=target.type,
            target_id=target.id,
            decision=decision,
            reason=reason,
            evaluator=spec.evaluator,
            evaluator_version=version,
            decided_at=datetime.now(UTC),
            score_id=score,
            judge_request_id=judge_request_id,
            cost_usd=cost,
        )

    async def _evaluator(self, project: str, spec: RuleIn) -> tuple[Evaluator | None, int, str]:
        """The evaluator version the rule runs now, parsed; or None and why not."""
        try:
            found = await anyio.to_thread.run_sync(
                self._evaluators.resolve, project, spec.evaluator, spec.evaluator_version
            )
            (evaluator,) = parse_evaluators([found.definition])
        except ContractError as exc:
            return None, spec.evaluator_version or 0, exc.message
        return evaluator, found.version, ""

    async def _label_version(self, project: str, spec: RuleIn) -> int | None:
        name, label = spec.filter.prompt_name, spec.filter.label
        if name is None or label is None:
            return None
        try:
            found = await anyio.to_thread.run_sync(
                lambda: self._prompts.resolve_version(project, name, label=label)
            )
        except ContractError:
            return None  # the label points nowhere now: no record matches
        return found.version

    async def _spent(self, project: str, rule_id: str, state: _RuleState) -> float:
        """The rule's spend today (UTC): summed from the log's prices once a day and every
        :data:`RESUM_SECONDS`, counted up by each judge call in between."""
        today = day_start(datetime.now(UTC))
        if state.day != today or time.monotonic() - state.summed_at > RESUM_SECONDS:
            await anyio.to_thread.run_sync(self._settle, project)
            state.spent = await anyio.to_thread.run_sync(self._work.spend, project, rule_id, today)
            state.day, state.summed_at = today, time.monotonic()
        return state.spent


def _arrival_decision(spec: RuleIn, target_type: str, sampled: bool) -> tuple[str, str, int]:
    version = spec.evaluator_version or 0
    if not sampled:
        return "not_sampled", _outside(spec), version
    if target_type != "record":
        return (
            "waiting",
            f"the rule's idle time of {spec.idle_seconds} s: decided once the {target_type} "
            "has had no new record that long",
            version,
        )
    due = datetime.now(UTC) + timedelta(seconds=spec.delay_seconds)
    return (
        "waiting",
        f"the rule's delay of {spec.delay_seconds} s: decided after {due.isoformat()}",
        version,
    )


def _outside(spec: RuleIn) -> str:
    return f"outside the rule's sample (sampling {spec.sampling})"


def _take(state: _RuleState, per_minute: int) -> bool:
    """Take a token from the rule's bucket (``per_minute`` tokens, refilled evenly)."""
    now = time.monotonic()
    if state.tokens is None:
        state.tokens = float(per_minute)
    else:
        state.tokens = min(
            float(per_minute), state.tokens + (now - state.filled_at) * per_minute / 60
        )
    state.filled_at = now
    if state.tokens < 1:
        return False
    state.tokens -= 1
    return True


def _failed(decision: DecisionRow, message: str) -> DecisionRow:
    return DecisionRow(
        rule_id=decision.rule_id,
        target_type=decision.target_type,
        target_id=decision.target_id,
        decision="error",
        reason=f"the score was not stored: {message}",
        evaluator=decision.evaluator,
        evaluator_version=decision.evaluator_version,
        decided_at=decision.decided_at,
        judge_request_id=decision.judge_request_id,
        cost_usd=decision.cost_usd,
    )
