"""Decisions (docs/api-notes.md, "Online evaluation"): exactly one per rule and matching
target, saying why it was scored or why not.

:meth:`DecisionService.decide` is what the evaluation worker calls; a ``waiting`` decision
is replaced by the target's final one, and only ``waiting`` ever changes (the store's row
version sees to that, whatever order the writes land in).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ...errors import ValidationFailed
from ...models.evaluation import DECISIONS
from ...store.evaluation import DecisionRow, DecisionStore
from ...store.evaluation_work import EvaluationWorkStore
from ..cursors import CursorCodec
from ..refused_writes import raise_if_refused
from .rules import Rule, RuleService

TARGETS = ("record", "trace", "session")


class DecisionService:
    """Record a rule's decisions and list them."""

    def __init__(
        self,
        store: DecisionStore,
        rules: RuleService,
        cursor_secret: str,
        retry_after_seconds: int = 2,
        work: EvaluationWorkStore | None = None,
    ) -> None:
        self._store = store
        self._work = work
        self._rules = rules
        self._cursors = CursorCodec(cursor_secret, "evaluation decisions")
        self._retry_after = retry_after_seconds

    def decide(
        self,
        project: str,
        rule: Rule,
        target_type: str,
        target_id: str,
        decision: str,
        reason: str,
        score_id: str | None = None,
        judge_request_id: str | None = None,
        cost_usd: float | None = None,
        evaluator_version: int | None = None,
    ) -> DecisionRow:
        """Store the rule's decision on one target (replacing its ``waiting`` one); return it.

        ``evaluator_version`` is the version that ran (default: the rule's pinned version,
        else 0 for "not resolved", as for a target never evaluated).
        """
        if target_type not in TARGETS:
            raise ValueError(f"unknown target type {target_type!r}")
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        row = DecisionRow(
            rule_id=rule.id,
            target_type=target_type,
            target_id=target_id,
            decision=decision,
            reason=reason,
            evaluator=rule.spec.evaluator,
            evaluator_version=evaluator_version or rule.spec.evaluator_version or 0,
            decided_at=datetime.now(UTC),
            score_id=score_id,
            judge_request_id=judge_request_id,
            cost_usd=cost_usd,
        )
        raise_if_refused(self._store.append(project, [row]), self._retry_after, "decision")
        return row

    def page(
        self,
        project: str,
        rule_id: str,
        decision: str | None,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[DecisionRow], str | None]:
        """A page of a rule's decisions (of one kind when ``decision`` is given), newest
        first, and the next cursor; 404 RULE_NOT_FOUND for an unknown rule."""
        if decision is not None and decision not in DECISIONS:
            raise ValidationFailed(
                "decision", f"unknown decision '{decision}': use one of {', '.join(DECISIONS)}"
            )
        self._rules.live(project, rule_id)
        after = self._cursors.after(
            cursor,
            lambda p: (datetime.fromisoformat(p["at"]), str(p["type"]), str(p["id"])),
        )
        rows = self._store.page(project, rule_id, decision, after, limit + 1)
        return self._cursors.next_page(
            rows,
            limit,
            lambda r: {"at": r.decided_at.isoformat(), "type": r.target_type, "id": r.target_id},
        )

    def on_target(self, project: str, target_type: str, target_id: str) -> list[DecisionRow]:
        """Every live rule's decision on one target (what its detail shows), oldest first."""
        if self._work is None:
            return []
        rows = self._work.of_target(project, target_type, target_id)
        live = self._work.live_rule_ids(project, sorted({r.rule_id for r in rows}))
        return [r for r in rows if r.rule_id in live]
