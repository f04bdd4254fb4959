"""Experiments, their results and comparisons (CONTRACT 11)."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Path, Query
from pydantic import BaseModel

from ...models.envelopes import Data, Page, Pagination
from ...models.experiments import (
    CompareOut,
    Counts,
    ExperimentIn,
    ExperimentOut,
    ResultOut,
    ResultsIn,
)
from ...models.requests import BatchResult, RejectedRecord
from ...services.experiments import EMPTY_SUMMARY, Computed
from ...services.mappers import pagination
from ...store.experiments import ExperimentRow, ResultRow
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/experiments", tags=["experiments"])

Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]
ExperimentId = Annotated[str, Path(min_length=1, max_length=200)]
Ref = Annotated[str, Query(min_length=1, max_length=200)]


class ComparePageOut(BaseModel):
    """A comparison, and the pagination of its items."""

    data: CompareOut
    pagination: Pagination


def experiment_out(row: ExperimentRow, computed: Computed) -> ExperimentOut:
    """The wire shape of an experiment with its counts and summary."""
    spec = row.spec
    return ExperimentOut.model_validate(
        {
            "id": row.id,
            "name": row.name,
            "dataset": row.dataset_name,
            "dataset_id": row.dataset_id,
            "task": row.task,
            "prompt_name": row.prompt_name,
            "version": row.version,
            "label": spec.get("label"),
            "model": row.model,
            "status": row.status,
            "error": spec.get("error"),
            "evaluators": spec.get("evaluators", []),
            "repetitions": spec.get("repetitions", 1),
            "concurrency": spec.get("concurrency", 1),
            "metadata": row.metadata,
            "counts": Counts(
                items=row.items, runs=row.runs, done=computed.done, errors=computed.errors
            ),
            "summary": computed.summary,
            "created_at": row.created_at,
            "completed_at": row.completed_at,
        }
    )


def result_out(row: ResultRow) -> ResultOut:
    """The wire shape of one result."""
    return ResultOut.model_validate(
        {
            "item_id": row.item_id,
            "repetition": row.repetition,
            "request_id": row.request_id,
            "trace_id": row.trace_id,
            "input_variables": row.input_variables,
            "expected_output": row.expected_output,
            "output": row.output,
            "status": row.status,
            "error": row.error or None,
            "scores": row.scores,
            "latency_ms": row.latency_ms,
            "estimated_cost_usd": row.estimated_cost_usd,
        }
    )


@router.post("", status_code=201, response_model=Data[ExperimentOut])
async def create_experiment(
    body: ExperimentIn, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Start a prompt version over a dataset (``status`` running), or with ``task: client``
    open an experiment whose results the client posts."""
    experiments = services.experiments
    row, items = await anyio.to_thread.run_sync(experiments.create, project, body)
    experiments.start(project, row, items)
    return Data(data=experiment_out(row, Computed(0, 0, EMPTY_SUMMARY)))


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
    return Page(data=[experiment_out(r, c) for r, c in rows], pagination=pagination(next_cursor))


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
        data=CompareOut.model_validate(page.data), pagination=pagination(page.next_cursor)
    )


@router.get("/{id}", response_model=Data[ExperimentOut])
def get_experiment(
    id: ExperimentId, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Return one experiment with its counts and summary."""
    return Data(data=experiment_out(*services.experiments.get(project, id)))


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
    return Page(data=[result_out(r) for r in rows], pagination=pagination(next_cursor))


@router.post("/{id}/cancel", response_model=Data[ExperimentOut])
def cancel_experiment(
    id: ExperimentId, project: Project, services: ServicesDep
) -> Data[ExperimentOut]:
    """Stop a running experiment; the results it stored stay."""
    row = services.experiments.cancel(project, id)
    return Data(data=experiment_out(row, services.experiments.computed(project, row)))


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
    return Data(data=experiment_out(row, services.experiments.computed(project, row)))
