"""Experiments, their results and comparisons (docs/api-notes.md, "Datasets and experiments")."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel

from ...models.envelopes import Data, Page, Pagination
from ...models.experiments import (
    CompareOut,
    ExperimentIn,
    ExperimentOut,
    ResultOut,
    ResultsIn,
)
from ...models.requests import BatchResult, RejectedRecord
from ...services.experiments import EMPTY_SUMMARY, Computed, ExperimentRow
from ..audit_hook import note_created
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/experiments", tags=["experiments"])

Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]
ExperimentId = Annotated[str, Path(min_length=1, max_length=200)]
Ref = Annotated[str, Query(min_length=1, max_length=200)]


def _experiment_out(row: ExperimentRow, computed: Computed) -> ExperimentOut:
    return ExperimentOut.of_row(row, computed.done, computed.errors, computed.summary)


class ComparePageOut(BaseModel):
    """A comparison, and the pagination of its items."""

    data: CompareOut
    pagination: Pagination


@router.post("", status_code=201, response_model=Data[ExperimentOut])
async def create_experiment(
    body: ExperimentIn, request: Request, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Start a prompt version over a dataset (``status`` running), or with ``task: client``
    open an experiment whose results the client posts."""
    experiments = services.experiments
    row, items = await anyio.to_thread.run_sync(experiments.create, project, body)
    experiments.start(project, row, items)
    note_created(request, row.id)  # the audit entry's id (api/audit_hook.py)
    return Data(data=_experiment_out(row, Computed(0, 0, EMPTY_SUMMARY)))


@router.get("", response_model=Page[ExperimentOut])
def list_experiments(
    project: Project,
    services: ServicesDep,
    dataset: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    prompt_name: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Limit = 20,
    cursor: Cursor = None,
) -> Page[ExperimentOut]:
    """List experiments, newest first (``dataset`` takes a name or an id)."""
    rows, next_cursor = services.experiments.page(project, dataset, prompt_name, limit, cursor)
    items = [_experiment_out(row, computed) for row, computed in rows]
    return Page(data=items, pagination=Pagination.of(next_cursor))


@router.get("/compare", response_model=ComparePageOut)
def compare_experiments(
    base: Ref,
    candidate: Ref,
    project: Project,
    services: ServicesDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ComparePageOut:
    """Pair two experiments by item: per-score deltas with 95% intervals; items with the
    largest regression first (paged)."""
    page = services.experiments.compare(project, base, candidate, limit, cursor)
    return ComparePageOut(
        data=CompareOut.model_validate(page.data), pagination=Pagination.of(page.next_cursor)
    )


@router.get("/{id}", response_model=Data[ExperimentOut])
def get_experiment(
    id: ExperimentId, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Return one experiment with its counts and summary."""
    return Data(data=_experiment_out(*services.experiments.get(project, id)))


@router.get("/{id}/results", response_model=Page[ResultOut])
def list_results(
    id: ExperimentId,
    project: Project,
    services: ServicesDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[ResultOut]:
    """List an experiment's results in item order (then repetition)."""
    rows, next_cursor = services.experiments.results_page(project, id, limit, cursor)
    return Page(data=[ResultOut.of(r) for r in rows], pagination=Pagination.of(next_cursor))


@router.post("/{id}/cancel", response_model=Data[ExperimentOut])
def cancel_experiment(
    id: ExperimentId, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Stop a running experiment; the results it stored stay."""
    row = services.experiments.cancel(project, id)
    return Data(data=_experiment_out(row, services.experiments.computed(project, row)))


@router.post("/{id}/results", status_code=201, response_model=Data[BatchResult])
def post_results(
    id: ExperimentId, body: ResultsIn, project: Project, services: ServicesDep
) -> Data[BatchResult]:
    """Store results of an experiment run by the client (a result posted again replaces it)."""
    accepted, rejected = services.experiments.post_results(project, id, body.results)
    return Data(
        data=BatchResult(
            accepted=accepted, rejected=[RejectedRecord(index=i, error=e) for i, e in rejected]
        )
    )


@router.post("/{id}/complete", response_model=Data[ExperimentOut])
def complete_experiment(
    id: ExperimentId, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Mark an experiment run by the client completed."""
    row = services.experiments.complete(project, id)
    return Data(data=_experiment_out(row, services.experiments.computed(project, row)))
