"""One place shapes each answer: a function per row type and the response model it becomes.

Services hand routes their rows (store rows, or the service's own results); every route that
answers with a model calls the one function here that builds it, so a field is added or
renamed once. The template payload, a model of its own rules, is built in ``templates.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..models.datasets import DatasetOut, ItemOut
from ..models.envelopes import Pagination
from ..models.experiments import Counts, ExperimentOut, ResultOut
from ..models.prompts import (
    LabelOut,
    PromptGetOut,
    PromptListItem,
    PromptOut,
    PromptUpdateOut,
    RollbackOut,
    VersionDetailOut,
    VersionOut,
)
from ..models.requests import (
    AnalyticsGroup,
    AnalyticsResult,
    ExportOut,
    HighlightRun,
    IntegrationOut,
    Period,
    RequestDetail,
    RequestListItem,
    SearchHit,
    TimingOut,
    UsageDetailOut,
    UsageOut,
)
from ..models.scores import ScoreConfigOut, ScoreOut
from ..models.traces import TraceListItem
from ..store.datasets import DatasetRow, ItemRow
from ..store.experiments import ExperimentRow, ResultRow
from ..store.exports import ExportJob
from ..store.prompts import PromptHeadRow, PromptVersionRow
from ..store.request_rows import RequestRow
from ..store.score_rows import ScoreConfigRow, ScoreRow
from ..store.traces import TraceSummary
from .analytics import AnalyticsOutcome
from .experiments import Computed
from .highlights import as_html
from .prompts.service import LabeledVersion, public_id
from .requests import Hit
from .scores import Scores

# -- pages -----------------------------------------------------------------------------------


def pagination(next_cursor: str | None, total: int | None = None) -> Pagination:
    """Return a page's pagination: more pages exactly when there is a next cursor."""
    return Pagination(has_more=next_cursor is not None, next_cursor=next_cursor, total=total)


# -- prompts ---------------------------------------------------------------------------------


def _prompt_fields(row: PromptVersionRow) -> dict[str, Any]:
    """Every field a prompt answer may show; each answer's model keeps its own subset."""
    return {
        "id": public_id(row.prompt_id),
        "name": row.name,
        "description": row.description,
        "template": row.template,
        "model": row.model,
        "parameters": row.parameters,
        "version": row.version,
        "tags": row.tags,
        "folder": row.folder or None,
        "created_at": row.prompt_created_at,  # the prompt's creation
        "updated_at": row.created_at,  # its newest version's
    }


def prompt_out(row: PromptVersionRow) -> PromptOut:
    """A created prompt: its first version, whole."""
    return PromptOut.model_validate(_prompt_fields(row))


def prompt_get_out(row: PromptVersionRow) -> PromptGetOut:
    """A prompt as get shows it: its newest version's subset."""
    return PromptGetOut.model_validate(_prompt_fields(row))


def prompt_update_out(row: PromptVersionRow) -> PromptUpdateOut:
    """An updated prompt: the new version's subset."""
    return PromptUpdateOut.model_validate(_prompt_fields(row))


def prompt_list_item(head: PromptHeadRow) -> PromptListItem:
    """A prompt in the list, from its head (newest version's list fields)."""
    return PromptListItem(
        id=public_id(head.prompt_id),
        name=head.name,
        description=head.description,
        version=head.version,
        created_at=head.prompt_created_at,
        tags=head.tags,
        folder=head.folder or None,
    )


def version_out(version: LabeledVersion) -> VersionOut:
    """A version in the history."""
    row = version.row
    return VersionOut(
        version=row.version,
        template=row.template,
        model=row.model,
        labels=version.labels,
        note=row.note or None,
        created_at=row.created_at,
    )


def version_detail_out(version: LabeledVersion) -> VersionDetailOut:
    """One version, with its parameters."""
    return VersionDetailOut(**version_out(version).model_dump(), parameters=version.row.parameters)


def rollback_out(row: PromptVersionRow) -> RollbackOut:
    """The version a rollback made."""
    return RollbackOut(version=row.version, template=row.template, note=row.note)


def label_out(label: str, version: int, updated_at: datetime) -> LabelOut:
    """A label and the version it points at."""
    return LabelOut(label=label, version=version, updated_at=updated_at)


# -- request log -----------------------------------------------------------------------------


def _record_fields(row: RequestRow) -> dict[str, Any]:
    """What a list item and the detail both show of a record (``0`` and ``""`` as none)."""
    return {
        "id": row.id,
        "prompt_name": row.prompt_name,
        "version": row.version or None,
        "model": row.model,
        "status": row.status,
        "input_variables": row.input_variables,
        "output": row.output,
        "metadata": row.metadata,
        "created_at": row.created_at,
        "cost_known": row.cost_known,
        "trace_id": row.trace_id or None,
        "span_id": row.span_id or None,
        "parent_span_id": row.parent_span_id or None,
        "span_name": row.span_name or None,
        "kind": row.kind,
    }


def request_list_item(
    row: RequestRow, scores: dict[str, bool | int | float | str] | None = None
) -> RequestListItem:
    """A record as lists show it, with its score summary (``ScoreService.summaries``)."""
    return RequestListItem(
        **_record_fields(row),
        scores=scores or {},
        usage=UsageOut(total_tokens=row.total_tokens, estimated_cost_usd=row.estimated_cost_usd),
        latency_ms=row.latency_ms,
    )


def request_detail(row: RequestRow, scores: Sequence[ScoreRow] = ()) -> RequestDetail:
    """A record as its detail (and the answer of a log) shows it, with its scores."""
    integration = row.integration
    return RequestDetail(
        **_record_fields(row),
        scores=[score_out(s) for s in scores],
        usage=UsageDetailOut(
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            total_tokens=row.total_tokens,
            estimated_cost_usd=row.estimated_cost_usd,
            cached_tokens=row.cached_tokens,
            cache_write_tokens=row.cache_write_tokens,
            reasoning_tokens=row.reasoning_tokens,
        ),
        timing=TimingOut(
            total_latency_ms=row.latency_ms,
            pre_process_ms=row.pre_process_ms,
            llm_call_ms=row.llm_call_ms,
            post_process_ms=row.post_process_ms,
        ),
        integration=IntegrationOut(
            pre_process_executed=bool(integration.get("pre_process_executed", False)),
            post_process_executed=bool(integration.get("post_process_executed", False)),
            errors=list(integration.get("errors", [])),
        ),
        provider=row.provider or None,
        input=row.input,
        error=row.error or None,
        time_to_first_token_ms=row.time_to_first_token_ms,
    )


def search_hit(hit: Hit) -> SearchHit:
    """A search hit: each matched field's snippet as HTML (the spec's) and as text runs."""
    return SearchHit(
        id=hit.row.id,
        prompt_name=hit.row.prompt_name,
        matched_fields=list(hit.runs),
        highlights={path: as_html(runs) for path, runs in hit.runs.items()},
        highlight_runs={
            path: [HighlightRun(**run) for run in runs] for path, runs in hit.runs.items()
        },
        created_at=hit.row.created_at,
    )


def analytics_result(outcome: AnalyticsOutcome) -> AnalyticsResult:
    """An analytics answer; latency groups carry their percentiles."""
    return AnalyticsResult(
        metric=outcome.metric,
        total=outcome.total,
        groups=[
            AnalyticsGroup(
                name=g.name,
                value=g.value,
                count=g.count,
                p50=g.percentiles[0] if g.percentiles else None,
                p95=g.percentiles[1] if g.percentiles else None,
                p99=g.percentiles[2] if g.percentiles else None,
            )
            for g in outcome.groups
        ],
        period=Period(start=outcome.start, end=outcome.end),
        cost_unknown_records=outcome.cost_unknown_records,
        score_count=outcome.score_count,
    )


def export_out(job: ExportJob, download_url: Callable[[str], str]) -> ExportOut:
    """An export job; its ``download_url`` (built by the route) only once the file is ready."""
    completed = job.status == "completed"
    return ExportOut(
        export_id=job.export_id,
        status=job.status,
        download_url=download_url(job.export_id) if completed else None,
        created_at=job.created_at,
        format=job.format,
        row_count=job.row_count if completed else None,
        error=job.error or None,
    )


# -- scores ----------------------------------------------------------------------------------


def score_out(row: ScoreRow) -> ScoreOut:
    """Return a score as every answer shows it."""
    return ScoreOut(
        id=row.id,
        request_id=row.request_id,
        trace_id=row.trace_id,
        name=row.name,
        data_type=row.data_type,
        value=row.value,
        comment=row.comment,
        correction=row.correction,
        source=row.source,
        metadata=row.metadata,
        created_at=row.created_at,
    )


def score_config_out(row: ScoreConfigRow) -> ScoreConfigOut:
    """Return a score config."""
    return ScoreConfigOut(
        name=row.name,
        data_type=row.data_type,
        min=row.min,
        max=row.max,
        categories=row.categories,
        description=row.description,
        updated_at=row.updated_at,
    )


def dataset_out(row: DatasetRow) -> DatasetOut:
    """The wire shape of a dataset."""
    return DatasetOut(
        id=row.id,
        name=row.name,
        description=row.description,
        metadata=row.metadata,
        item_count=row.item_count,
        created_at=row.created_at,
    )


def item_out(row: ItemRow) -> ItemOut:
    """The wire shape of a dataset item."""
    return ItemOut(
        id=row.id,
        input_variables=row.input_variables,
        expected_output=row.expected_output,
        metadata=row.metadata,
        source_request_id=row.source_request_id,
        created_at=row.created_at,
    )


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


def trace_item(summary: TraceSummary, scores: Scores) -> TraceListItem:
    """A trace as the list shows it."""
    return TraceListItem(
        trace_id=summary.trace_id,
        name=summary.name,
        started_at=summary.started_at,
        duration_ms=summary.duration_ms,
        records=summary.records,
        llm_calls=summary.llm_calls,
        errors=summary.errors,
        total_tokens=summary.total_tokens,
        estimated_cost_usd=summary.estimated_cost_usd,
        user_id=summary.user_id or None,
        session_id=summary.session_id or None,
        scores=scores,
    )
