"""Evaluation rules (docs/api-notes.md, "Online evaluation"): create, read, change and
delete the rules that run a named evaluator on new production data.

A rule is checked whole on every write: its body by :class:`~...models.evaluation.RuleIn`,
then against the store (its evaluator, and that version of it, must exist: 404
EVALUATOR_NOT_FOUND) and against its target (``transcript`` is a session's path). A PATCH
merges the fields it gives into the stored rule (``filter`` and ``mapping`` are replaced
whole; ``null`` resets an optional field to its default) and checks the result the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from ...errors import RuleNotFound, ValidationFailed
from ...models.evaluation import DECISIONS, NULLABLE_RULE_FIELDS, RuleIn, RulePatch
from ...store.evaluation import DecisionStore, EvaluationStore, RuleRow
from ..cursors import CursorCodec, time_key
from ..refused_writes import raise_if_refused
from .evaluators import EvaluatorService

COUNTS_SINCE = timedelta(hours=24)


def new_rule_id() -> str:
    """Return ``rule_<32 hex>``."""
    return f"rule_{os.urandom(16).hex()}"


@dataclass(frozen=True)
class Rule:
    """A stored rule, checked, with what a read adds: its decisions of the last 24 hours
    by kind (every kind listed) and its backfill (None: none has run)."""

    id: str
    spec: RuleIn
    created_at: datetime
    updated_at: datetime
    counts: dict[str, int]
    backfill: dict[str, Any] | None = None

    @property
    def score_name(self) -> str:
        """The name its scores are written under (default: the evaluator's name)."""
        return self.spec.score_name or self.spec.evaluator


class RuleService:
    """Create, read, change and delete evaluation rules."""

    def __init__(
        self,
        store: EvaluationStore,
        decisions: DecisionStore,
        evaluators: EvaluatorService,
        cursor_secret: str,
        retry_after_seconds: int = 2,
    ) -> None:
        self._store = store
        self._decisions = decisions
        self._evaluators = evaluators
        self._cursors = CursorCodec(cursor_secret, "evaluation rules")
        self._retry_after = retry_after_seconds
        # Told of every stored change, so the worker picks a new rule up at once (set by the
        # services' container to the worker's wake).
        self.on_change: Callable[[], None] = lambda: None

    def create(self, project: str, body: RuleIn) -> Rule:
        """Check and store a new rule; return it."""
        self._check(project, body)
        now = datetime.now(UTC)
        row = RuleRow(
            id=new_rule_id(),
            spec=_spec(body),
            created_at=now.replace(microsecond=now.microsecond // 1000 * 1000),
            updated_at=now,
        )
        self._put(project, row)
        return self._with_counts(project, [row])[0]

    def get(self, project: str, rule_id: str) -> Rule:
        """A rule with its counts, or 404 RULE_NOT_FOUND."""
        return self._with_counts(project, [self._row(project, rule_id)])[0]

    def page(self, project: str, limit: int, cursor: str | None) -> tuple[list[Rule], str | None]:
        """A page of rules, newest first, and the next cursor."""
        rows = self._store.rules(project, self._cursors.after_time(cursor), limit + 1)
        page, next_cursor = self._cursors.next_page(
            rows, limit, lambda row: time_key(row.created_at, row.id)
        )
        return self._with_counts(project, page), next_cursor

    def patch(self, project: str, rule_id: str, body: RulePatch) -> Rule:
        """Merge the fields ``body`` gives into the rule, check the result, store it."""
        row = self._row(project, rule_id)
        given = body.model_dump(exclude_unset=True, mode="json")
        for key, value in given.items():
            if value is None and key not in NULLABLE_RULE_FIELDS:
                raise ValidationFailed(key, f"{key} cannot be null")
        merged = {**row.spec, **given}
        merged = {key: value for key, value in merged.items() if value is not None}
        try:
            spec = RuleIn.model_validate(merged)
        except ValidationError as exc:  # a mix of old and new fields that does not hold
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "body"
            raise ValidationFailed(field, f"{field}: {first['msg']}") from None
        self._check(project, spec)
        changed = replace(row, spec=_spec(spec), updated_at=datetime.now(UTC))
        self._put(project, changed)
        return self._with_counts(project, [changed])[0]

    def delete(self, project: str, rule_id: str) -> Rule:
        """Delete a rule (its decisions stay, unlisted); return what it was."""
        rule = self.get(project, rule_id)
        row = RuleRow(rule.id, _spec(rule.spec), rule.created_at, datetime.now(UTC))
        outcome = self._store.put_rule(project, row, deleted=True)
        raise_if_refused(outcome, self._retry_after, "evaluation rule")
        return rule

    def live(self, project: str, rule_id: str) -> Rule:
        """A rule without its counts (what the decisions' reads and the worker need)."""
        row = self._row(project, rule_id)
        return Rule(row.id, RuleIn.model_validate(row.spec), row.created_at, row.updated_at, {})

    # -- helpers ------------------------------------------------------------------------------

    def _row(self, project: str, rule_id: str) -> RuleRow:
        row = self._store.rule(project, rule_id)
        if row is None:
            raise RuleNotFound(rule_id)
        return row

    def _put(self, project: str, row: RuleRow) -> None:
        raise_if_refused(self._store.put_rule(project, row), self._retry_after, "evaluation rule")
        self.on_change()

    def _check(self, project: str, spec: RuleIn) -> None:
        """Refuse a rule whose evaluator (or version) does not exist, or whose mapping names
        a path its target does not have."""
        self._evaluators.resolve(project, spec.evaluator, spec.evaluator_version)
        if spec.mapping is not None and spec.target != "session":
            for key in ("input", "output", "expected"):
                if getattr(spec.mapping, key) == "transcript":
                    raise ValidationFailed(
                        f"mapping.{key}",
                        "transcript is a session's whole conversation: only a rule whose "
                        "target is session maps it",
                    )
        if (spec.filter.version is not None or spec.filter.label is not None) and (
            spec.filter.prompt_name is None
        ):
            field = "filter.version" if spec.filter.version is not None else "filter.label"
            raise ValidationFailed(field, f"{field} needs filter.prompt_name: whose version?")
        if spec.filter.version is not None and spec.filter.label is not None:
            raise ValidationFailed("filter.label", "filter by a version or a label, not both")

    def _with_counts(self, project: str, rows: list[RuleRow]) -> list[Rule]:
        counts = self._decisions.counts(project, [r.id for r in rows], COUNTS_SINCE)
        return [
            Rule(
                id=row.id,
                spec=RuleIn.model_validate(row.spec),
                created_at=row.created_at,
                updated_at=row.updated_at,
                counts=zero_filled(counts.get(row.id, {})),
            )
            for row in rows
        ]


def zero_filled(found: dict[str, int]) -> dict[str, int]:
    """Counts by decision with every kind of decision listed (0 when none)."""
    return {decision: found.get(decision, 0) for decision in DECISIONS}


def _spec(body: RuleIn) -> dict[str, Any]:
    """A rule's fields as stored: what was given, without the defaults of absent optional
    fields (so a PATCH's null can reset them)."""
    spec = body.model_dump(mode="json", exclude_none=True)
    spec["filter"] = body.filter.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    return spec
