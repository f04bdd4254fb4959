"""An online evaluation's verdict on one target (docs/api-notes.md, "Online evaluation"): a
code evaluator's, or an LLM judge's called through the credential order.

A judge's call is a run of its prompt (:class:`..runs.RunService`): routed by the credential
order (docs/api-notes.md, "Connections"), priced, and logged as a record in the reserved
``promptrail-evaluation`` environment with ``metadata.judge_of`` (the judged target) and
``metadata.rule_id``. A connection that refuses the key, has no quota left, cannot be reached
or has spent its budget blocks the route: the targets judged through it meanwhile are
``connection_blocked`` (the status as reason), without a call, until a back-off has passed
(:data:`BACKOFF_FIRST` seconds, doubled after each failed retry up to :data:`BACKOFF_MAX`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from promptrail._evaluators import evaluate_simple, judge_value

from ...errors import ContractError, UpstreamProviderFailed
from ...models.requests import EVALUATION_ENVIRONMENT
from ...models.runs import RunRequest
from ..evaluators import Evaluator
from ..runs import PreparedRun, RunService, RunTarget
from .targets import Mapped, as_text

logger = logging.getLogger("promptrail.evaluation")

BACKOFF_FIRST = 30.0
BACKOFF_MAX = 600.0


def score_id(rule_id: str, target_id: str) -> str:
    """The id of a rule's score on a target: the same every time it is evaluated (a backfill
    or a retry replaces the score)."""
    return "eval_" + hashlib.sha256(f"{rule_id}\x00{target_id}".encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Verdict:
    """What an evaluator made of one target: a value to score, or the decision saying why
    not (``decision`` ``error`` or ``connection_blocked`` with its reason)."""

    value: Any = None
    decision: str = "scored"
    reason: str = ""
    judge_request_id: str | None = None
    cost_usd: float | None = None


def run_code(evaluator: Evaluator, given: Mapped) -> Verdict:
    """A code evaluator's verdict (no model)."""
    if given.output is None:
        return Verdict(decision="error", reason="the mapped output names nothing in the record")
    value = evaluate_simple(
        evaluator.type, as_text(given.output), given.expected, evaluator.pattern
    )
    if value is None:
        return Verdict(
            decision="error",
            reason=f"{evaluator.type} compares with an expected output: map one "
            "(mapping.expected) that this target has",
        )
    return Verdict(value=value, reason=f"{evaluator.type}: {value}")


@dataclass
class _Block:
    status: str
    until: float
    wait: float


def _blocking_status(exc: ContractError) -> str | None:
    """The check's status a failed judge call tells of its connection, or None when the
    failure is the call's own (an ``error`` decision)."""
    if exc.code == "BUDGET_EXCEEDED":
        return "budget_exceeded"
    if not isinstance(exc, UpstreamProviderFailed):
        return None
    status = exc.details.get("provider_status")
    text = exc.message.lower()
    if status in (401, 403):
        return "auth_invalid"
    if status == 402 or "insufficient_quota" in text or "credit balance is too low" in text:
        return "quota_exceeded"
    if status is None:
        return "unreachable"
    return None


class Judges:
    """Call judges through the credential order, blocking a failing route on a back-off."""

    def __init__(self, runs: RunService, now: Any = time.monotonic) -> None:
        self._runs = runs
        self._now = now
        self._blocks: dict[tuple[str, str], _Block] = {}
        self._healthy: set[tuple[str, str]] = set()
        self._probes: dict[tuple[str, str], asyncio.Lock] = {}

    async def judge(
        self,
        project: str,
        rule_id: str | None,
        evaluator: Evaluator,
        target_id: str,
        given: Mapped,
    ) -> Verdict:
        """Run the judge prompt on one target's mapped input and output. Without
        ``rule_id`` the call is a trial's (``metadata.trial``): no rule's budget counts it
        (a rule's spend sums its judges' records by ``metadata.rule_id``)."""
        owner: dict[str, Any] = {"rule_id": rule_id} if rule_id is not None else {"trial": True}
        body = RunRequest(
            variables={
                "input": "" if given.input is None else as_text(given.input),
                "output": "" if given.output is None else as_text(given.output),
                "expected_output": "" if given.expected is None else as_text(given.expected),
            },
            metadata={"judge_of": target_id, **owner},
        )
        target = RunTarget(evaluator.prompt or "", evaluator.version, evaluator.label)
        try:
            run = await self._runs.prepare(project, target, body, admit=False)
        except ContractError as exc:
            return Verdict(decision="error", reason=_problem(exc))
        route = (project, run.connection.name if run.connection else f"env:{run.provider.name}")
        if route in self._healthy:
            return await self._call(project, rule_id, evaluator, route, run)
        # A route not known to work is tried by one call at a time: a failing connection
        # is called once, not once per target judged at the same moment.
        async with self._probes.setdefault(route, asyncio.Lock()):
            return await self._call(project, rule_id, evaluator, route, run)

    async def _call(
        self,
        project: str,
        rule_id: str | None,
        evaluator: Evaluator,
        route: tuple[str, str],
        run: PreparedRun,
    ) -> Verdict:
        block = self._blocks.get(route)
        if block is not None and self._now() < block.until:
            return Verdict(decision="connection_blocked", reason=block.status)
        try:
            await self._runs.admit(run)
            reply = await self._runs.complete(replace(run, environment=EVALUATION_ENVIRONMENT))
        except ContractError as exc:
            status = _blocking_status(exc)
            if status is None:
                return Verdict(decision="error", reason=_problem(exc))
            self._healthy.discard(route)
            wait = BACKOFF_FIRST if block is None else min(block.wait * 2, BACKOFF_MAX)
            self._blocks[route] = _Block(status, self._now() + wait, wait)
            logger.warning(
                "judge route %s of project %s blocked for %.0f s: %s",
                route[1], project, wait, exc.message,
            )  # fmt: skip
            return Verdict(
                decision="connection_blocked",
                reason=status,
                judge_request_id=exc.details.get("request_id"),
            )
        except Exception as exc:
            logger.exception("judge %s of rule %s failed", evaluator.name, rule_id)
            return Verdict(decision="error", reason=f"internal error: {type(exc).__name__}")
        self._blocks.pop(route, None)
        self._healthy.add(route)
        cost = reply.usage.estimated_cost_usd
        value = judge_value(reply.output, evaluator.categories)
        if value is None:
            return Verdict(
                decision="error",
                reason="the judge's reply names no category and no number",
                judge_request_id=reply.id,
                cost_usd=cost,
            )
        return Verdict(
            value=value,
            reason=f"judged by '{evaluator.prompt}': {value}",
            judge_request_id=reply.id,
            cost_usd=cost,
        )


def _problem(exc: ContractError) -> str:
    missing = exc.details.get("missing_variables")
    if missing:
        return (
            f"the judge prompt uses {', '.join(missing)}, but a judge is given only input, "
            "output and expected_output"
        )
    return exc.message
