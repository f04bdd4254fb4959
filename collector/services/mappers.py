"""The experiment answers: the last two mappings kept apart from their models.

Every other answer is read from its rows beside its model (``collector/models``,
``RowModel``). These two read an experiment's spec (its JSON) and counts computed by the
service; they move beside ``ExperimentOut`` and ``ResultOut`` in ``models/experiments.py``
with the experiments' own split, and this module goes.
"""

from __future__ import annotations

from ..models.envelopes import Pagination
from ..models.experiments import Counts, ExperimentOut, ResultOut
from ..store.experiments import ExperimentRow, ResultRow
from .experiments import Computed

__all__ = ["experiment_out", "pagination", "result_out"]

# The routes' one call for a page's pagination (experiments' route still imports it here).
pagination = Pagination.of


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
