"""Named, versioned evaluators (docs/api-notes.md, "Online evaluation")."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Path

from ...models.envelopes import Data, Page, Pagination
from ...models.evaluation import (
    EVALUATOR_NAME_PATTERN,
    EvaluatorDetailOut,
    EvaluatorOut,
    EvaluatorVersionOut,
)
from ...store.evaluation import EvaluatorVersionRow
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/evaluators", tags=["evaluation"])

Name = Annotated[str, Path(pattern=EVALUATOR_NAME_PATTERN)]


def _version_out(row: EvaluatorVersionRow) -> EvaluatorVersionOut:
    return EvaluatorVersionOut(
        name=row.name, version=row.version, definition=row.definition, created_at=row.created_at
    )


def _detail(versions: list[EvaluatorVersionRow]) -> EvaluatorDetailOut:
    newest = versions[0]
    return EvaluatorDetailOut(
        name=newest.name,
        version=newest.version,
        type=str(newest.definition["type"]),
        definition=newest.definition,
        created_at=versions[-1].created_at,
        updated_at=newest.created_at,
        versions=[_version_out(v) for v in versions],
    )


@router.put("/{name}", response_model=Data[EvaluatorDetailOut])
async def put_evaluator(
    name: Name,
    body: Annotated[dict[str, Any], Body()],
    project: Project,
    services: ServicesDep,
) -> Data[EvaluatorDetailOut]:
    """Store an evaluator object under ``name``: a new version when it differs from the
    newest (the same definition again makes none); answers it with every version."""
    evaluators = services.evaluation.evaluators

    def put() -> list[EvaluatorVersionRow]:
        evaluators.put(project, name, body)
        return evaluators.versions(project, name)

    return Data(data=_detail(await anyio.to_thread.run_sync(put)))


@router.get("", response_model=Page[EvaluatorOut])
def list_evaluators(project: Project, services: ServicesDep) -> Page[EvaluatorOut]:
    """Every named evaluator of the project at its newest version, by name (one page)."""
    evaluators = services.evaluation.evaluators
    newest = evaluators.newest(project)
    first = evaluators.first_created(project, [row.name for row in newest])
    items = [
        EvaluatorOut(
            name=row.name,
            version=row.version,
            type=str(row.definition["type"]),
            definition=row.definition,
            created_at=first.get(row.name, row.created_at),
            updated_at=row.created_at,
        )
        for row in newest
    ]
    return Page(data=items, pagination=Pagination.of(None))


@router.get("/{name}", response_model=Data[EvaluatorDetailOut])
def get_evaluator(name: Name, project: Project, services: ServicesDep) -> Data[EvaluatorDetailOut]:
    """One named evaluator with every version, newest first."""
    return Data(data=_detail(services.evaluation.evaluators.versions(project, name)))
