"""Deciding targets (docs/api-notes.md, "Online evaluation"), for the evaluation worker's
live path (:mod:`.worker`) and backfills (:mod:`.backfill`) alike: a rule's sample, budget
and rate, the evaluator's verdict, and the scores and decisions stored for a batch.

Apart from the worker's polling so each stays small, and so a backfill decides through
exactly the steps the live path takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio

from ...errors import ContractError
from ...models.evaluation import RuleIn
from ...models.scores import infer_data_type
from ...store.evaluation import WAITING, DecisionRow, DecisionStore, RuleRow
from ...store.evaluation_work import Candidate, EvaluationWorkStore, Position
from ...store.score_rows import ScoreRow
from ...store.writes import Refused
from ..evaluators import Evaluator, parse_evaluators
from ..prompts import PromptService
from ..scores import ScoreService, stored_time
from .evaluators import EvaluatorService
from .judging import Judges, Verdict, run_code, score_id
from .sampling import in_sample
from .targets import Target, mapped, matches

JUDGES_AT_ONCE = 8
# Within a worker's pass (Decider.remembering): the evaluator versions and prompt labels it
# resolved, each looked up once for all its rules and stages.
_RESOLVED: contextvars.ContextVar[dict[tuple[object, ...], Any] | None] = contextvars.ContextVar(
    "evaluation_resolved", default=None
)
RESUM_SECONDS = 60.0
# The score field naming each kind of target.
_SCORED_ON = {"record": "request_id", "trace": "trace_id", "session": "session_id"}


@dataclass
class RuleState:
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
    scores: list[ScoreRow] = field(default_factory=list)


def day_start(now: datetime) -> datetime:
    """The first instant of ``now``'s day, UTC."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


class Decider:
    """Decide targets of a rule and store what was decided; the worker's and backfills'
    common part, with the worker's memory of each rule (:meth:`state`)."""

    def __init__(
        self,
        work: EvaluationWorkStore,
        decisions: DecisionStore,
        evaluators: EvaluatorService,
        prompts: PromptService,
        scores: ScoreService,
        judges: Judges,
        settle: Callable[[str], None],
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
        self._states: dict[str, RuleState] = {}

    def state(self, rule_id: str) -> RuleState:
        """The worker's memory of a rule."""
        return self._states.setdefault(rule_id, RuleState())

    @contextlib.contextmanager
    def remembering(self) -> Iterator[None]:
        """Within: an evaluator's version, or a prompt label's, is resolved once (a worker's
        pass: its rules and stages decide by the same versions, as if at its start). Only
        the tasks of the caller's context share them: a backfill running meanwhile resolves
        its own."""
        token = _RESOLVED.set({})
        try:
            yield
        finally:
            _RESOLVED.reset(token)

    async def _once(self, key: tuple[object, ...], fn: Callable[[], Awaitable[Any]]) -> Any:
        memo = _RESOLVED.get()
        if memo is None:
            return await fn()
        if key not in memo:  # rules deciding at once share the one lookup
            memo[key] = asyncio.ensure_future(fn())
        return await asyncio.shield(memo[key])

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
            if again or t.id not in prior or (prior[t.id][0] == WAITING and not waiting)
        ]
        outcome = Outcome()
        if not todo:
            return outcome
        if waiting:
            # The version the rule runs now, as a final decision names it (a not_sampled
            # written here is final), not 0 for a rule that runs the newest.
            _, version, _ = await self._evaluator(project, spec)
            for target in todo:
                sampled = in_sample(row.id, target.id, spec.sampling)
                decision, reason = _arrival_decision(spec, target.type, sampled)
                outcome.decisions.append(self._row(row, spec, target, decision, reason, version))
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
                outcome.scores.append(
                    _score(project, sid, target, spec, verdict.value, row.id, version)
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
                    replaces=_waiting_since(prior.get(target.id)),
                )
            )
        return outcome

    async def _verdict(
        self,
        project: str,
        row: RuleRow,
        spec: RuleIn,
        state: RuleState,
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
        failed: dict[str, str] = {}
        if outcome.scores:
            # Rows of the worker's own making, several rules' at once: one typed write.
            _, rejected = self._scores.batch_own(project, outcome.scores)
            failed.update((outcome.scores[i].id, error.get("message", "")) for i, error in rejected)
        if failed:
            outcome.decisions = [
                _failed(d, failed[d.score_id]) if d.score_id in failed else d
                for d in outcome.decisions
            ]
        # Each final row names the waiting one it replaces, from the batch's read of prior.
        written = self._decisions.append(project, outcome.decisions, waiting_known=True)
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
        replaces: datetime | None = None,
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
            replaces_waiting=replaces,
        )

    async def _evaluator(self, project: str, spec: RuleIn) -> tuple[Evaluator | None, int, str]:
        """The evaluator version the rule runs now, parsed; or None and why not."""
        key = ("evaluator", project, spec.evaluator, spec.evaluator_version)
        found: tuple[Evaluator | None, int, str] = await self._once(
            key, lambda: self._resolve_evaluator(project, spec)
        )
        return found

    async def _resolve_evaluator(
        self, project: str, spec: RuleIn
    ) -> tuple[Evaluator | None, int, str]:
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
        found: int | None = await self._once(
            ("label", project, name, label), lambda: self._resolve_label(project, name, label)
        )
        return found

    async def _resolve_label(self, project: str, name: str, label: str) -> int | None:
        try:
            found = await anyio.to_thread.run_sync(
                lambda: self._prompts.resolve_version(project, name, label=label)
            )
        except ContractError:
            return None  # the label points nowhere now: no record matches
        return found.version

    async def _spent(self, project: str, rule_id: str, state: RuleState) -> float:
        """The rule's spend today (UTC): summed from the log's prices once a day and every
        :data:`RESUM_SECONDS`, counted up by each judge call in between."""
        today = day_start(datetime.now(UTC))
        if state.day != today or time.monotonic() - state.summed_at > RESUM_SECONDS:
            await anyio.to_thread.run_sync(self._settle, project)
            state.spent = await anyio.to_thread.run_sync(self._work.spend, project, rule_id, today)
            state.day, state.summed_at = today, time.monotonic()
        return state.spent


def _score(
    project: str, sid: str, target: Target, spec: RuleIn, value: Any, rule_id: str, version: int
) -> ScoreRow:
    """The score a rule gives a target, as the score store keeps it (source ``eval``; its
    metadata names the rule and the evaluator version)."""
    on = {_SCORED_ON[target.type]: target.id}
    return ScoreRow(
        project=project,
        id=sid,
        request_id=on.get("request_id"),
        trace_id=on.get("trace_id"),
        session_id=on.get("session_id"),
        name=spec.score_name or spec.evaluator,
        data_type=infer_data_type(value),
        value=value,
        comment=None,
        correction=None,
        source="eval",
        metadata={"rule_id": rule_id, "evaluator": spec.evaluator, "evaluator_version": version},
        created_at=stored_time(datetime.now(UTC)),
    )


def _arrival_decision(spec: RuleIn, target_type: str, sampled: bool) -> tuple[str, str]:
    if not sampled:
        return "not_sampled", _outside(spec)
    if target_type != "record":
        return (
            "waiting",
            f"the rule's idle time of {spec.idle_seconds} s: decided once the {target_type} "
            "has had no new record that long",
        )
    due = datetime.now(UTC) + timedelta(seconds=spec.delay_seconds)
    return (
        "waiting",
        f"the rule's delay of {spec.delay_seconds} s: decided after {due.isoformat()}",
    )


def _outside(spec: RuleIn) -> str:
    return f"outside the rule's sample (sampling {spec.sampling})"


def _take(state: RuleState, per_minute: int) -> bool:
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
        replaces_waiting=decision.replaces_waiting,
    )


def _waiting_since(prior: tuple[str, datetime] | None) -> datetime | None:
    """When the target's ``waiting`` decision was decided, if ``prior`` is one."""
    return prior[1] if prior is not None and prior[0] == WAITING else None
