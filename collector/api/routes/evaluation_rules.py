"""Evaluation rules and their decisions (docs/api-notes.md, "Online evaluation")."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from ...errors import ValidationFailed
from ...models.envelopes import Data, Page, Pagination
from ...models.evaluation import (
    BackfillIn,
    BackfillOut,
    Decision,
    DecisionOut,
    RuleIn,
    RuleOut,
    RulePatch,
)
from ...services.evaluation import Rule
from ...store.evaluation import DecisionRow
from ..audit_hook import note_created
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/evaluation-rules", tags=["evaluation"])

RuleId = Annotated[str, Path(min_length=1, max_length=200)]
Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]


def rule_out(rule: Rule) -> RuleOut:
    """A rule as answered."""
    spec = rule.spec
    return RuleOut(
        id=rule.id,
        name=spec.name,
        evaluator=spec.evaluator,
        evaluator_version=spec.evaluator_version,
        target=spec.target,
        filter=spec.filter.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
        sampling=spec.sampling,
        delay_seconds=spec.delay_seconds,
        idle_seconds=spec.idle_seconds,
        mapping=None if spec.mapping is None else spec.mapping.model_dump(exclude_none=True),
        score_name=rule.score_name,
        daily_budget_usd=spec.daily_budget_usd,
        max_per_minute=spec.max_per_minute,
        enabled=spec.enabled,
        counts=rule.counts,
        backfill=None if rule.backfill is None else BackfillOut.model_validate(rule.backfill),
        created_at=rule.created_at,
        updated_at=rule.updated_at,
    )


def _decision_out(row: DecisionRow) -> DecisionOut:
    return DecisionOut.model_validate(row, from_attributes=True)


@router.post("", status_code=201, response_model=Data[RuleOut])
def create_rule(
    body: RuleIn, request: Request, project: Project, services: ServicesDep
) -> Data[RuleOut]:
    """Create a rule running a named evaluator on new production data."""
    rule = services.evaluation.rules.create(project, body)
    note_created(request, rule.id)  # the audit entry's id (api/audit_hook.py)
    return Data(data=rule_out(rule))


@router.get("", response_model=Page[RuleOut])
def list_rules(
    project: Project, services: ServicesDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[RuleOut]:
    """List rules, newest first, each with its decisions of the last 24 hours by kind."""
    rules, next_cursor = services.evaluation.rules.page(project, limit, cursor)
    return Page(data=[rule_out(r) for r in rules], pagination=Pagination.of(next_cursor))


@router.get("/{id}", response_model=Data[RuleOut])
def get_rule(id: RuleId, project: Project, services: ServicesDep) -> Data[RuleOut]:
    """One rule with its decisions of the last 24 hours by kind and its backfill."""
    rule = services.evaluation.rules.get(project, id)
    worker = services.evaluation_worker
    if worker is not None and worker.backfills is not None:
        rule = replace(rule, backfill=worker.backfills.status(project, id))
    return Data(data=rule_out(rule))


@router.post("/{id}/backfill", status_code=202, response_model=Data[BackfillOut])
async def backfill_rule(
    id: RuleId, body: BackfillIn, project: Project, services: ServicesDep
) -> Data[BackfillOut]:
    """Run the rule on the records created in [from, to), deciding as the live path does;
    its progress is on the rule's GET."""
    worker = services.evaluation_worker
    if worker is None or worker.backfills is None:
        raise ValidationFailed("id", "this collector runs no evaluation worker")
    job = await worker.backfills.start(project, id, body.since, body.until)
    return Data(data=BackfillOut.model_validate(job.as_json()))


@router.patch("/{id}", response_model=Data[RuleOut])
def patch_rule(
    id: RuleId, body: RulePatch, project: Project, services: ServicesDep
) -> Data[RuleOut]:
    """Change a rule: each field given replaces the rule's; null resets an optional one."""
    return Data(data=rule_out(services.evaluation.rules.patch(project, id, body)))


@router.delete("/{id}", response_model=Data[RuleOut])
def delete_rule(id: RuleId, project: Project, services: ServicesDep) -> Data[RuleOut]:
    """Delete a rule (it judges nothing more, its decisions are no longer listed); answers
    what it was."""
    return Data(data=rule_out(services.evaluation.rules.delete(project, id)))


@router.get("/{id}/decisions", response_model=Page[DecisionOut])
def list_decisions(
    id: RuleId,
    project: Project,
    services: ServicesDep,
    decision: Decision | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[DecisionOut]:
    """A rule's decisions, newest first (``decision``: of that kind only)."""
    rows, next_cursor = services.evaluation.decisions.page(project, id, decision, limit, cursor)
    return Page(data=[_decision_out(r) for r in rows], pagination=Pagination.of(next_cursor))
