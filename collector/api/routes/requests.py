"""The request log (spec 4.5, docs/api-notes.md, "Request log"): log, list, detail, search, delete,
analytics."""

from __future__ import annotations

import email.message
import json
from typing import Annotated, Any, Literal, NoReturn

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ...errors import ValidationFailed
from ...models.envelopes import Data, ErrorBody, Page, Pagination
from ...models.requests import (
    AnalyticsResult,
    BatchResult,
    DeleteRequestsIn,
    DeleteResult,
    RejectedRecord,
    RequestBatchIn,
    RequestDetail,
    RequestListItem,
    RequestRecordIn,
    SearchHit,
)
from ...services.analytics import ListFilters
from ...services.highlights import as_html
from ...services.requests import is_score_param
from ..deps import IngestProject, Project, ServicesDep

router = APIRouter(prefix="/requests", tags=["requests"])

Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]
Kind = Annotated[
    str | None,
    Query(
        max_length=200,
        description="Record kinds, comma-separated (llm, embedding, chain, agent, tool, "
        "retriever, span), or all. Default: llm,embedding (every kind with trace_id).",
    ),
]
# The environments a list, search or analytics read (docs/api-notes.md, Environments).
Environment = Annotated[
    str | None,
    Query(
        max_length=2000,
        description="Environments, comma-separated, or all. Default: every environment but "
        "the service's own (promptrail-...); every one with trace_id.",
    ),
]


@router.post("", status_code=201, response_model=Data[RequestDetail])
async def log_request(
    request: Request, body: RequestRecordIn, project: IngestProject, services: ServicesDep
) -> Data[RequestDetail]:
    """Log one record of a call the client ran itself."""
    row = await run_in_threadpool(services.ingest.log_one, project, body)
    # The body was read (and kept) by the framework to parse it: this reads no more.
    services.rate_limits.charge_ingest(project, 1, len(await request.body()))
    return Data(data=RequestDetail.of_record(row))


_BATCH_BODY: dict[str, Any] = {
    "required": True,
    "description": "Records to log, each validated alone. `Content-Encoding: gzip` is accepted.",
    "content": {
        "application/json": {
            "schema": {
                "title": "RequestBatchIn",
                "type": "object",
                "required": ["records"],
                "properties": {
                    "records": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/RequestRecordIn"},
                    }
                },
            }
        }
    },
}


@router.post(
    "/batch",
    status_code=201,
    response_model=Data[BatchResult],
    openapi_extra={"requestBody": _BATCH_BODY},
    responses={400: {"model": ErrorBody, "description": "every record was rejected"}},
)
async def log_batch(
    request: Request, project: IngestProject, services: ServicesDep
) -> Data[BatchResult]:
    """Log many records; each bad record is reported by index and never drops the others."""
    # The raw body goes to the service, which validates it in one pass when every record is
    # valid: parsing it here into Python objects first would double the cost of a batch.
    body = await request.body()
    if not body or not _is_json(request.headers.get("content-type")):
        # The answers FastAPI gives for a body it would not read as JSON.
        _raise_invalid_envelope(body or None)
    try:
        outcome = await run_in_threadpool(services.ingest.log_batch_body, project, body)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
            body=exc.doc,  # so the answer can name the line and column
        ) from None
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        ) from None
    except ValueError:
        raise HTTPException(400, "There was an error parsing the body") from None
    services.rate_limits.charge_ingest(project, len(outcome.rows), len(body))
    rejected = [RejectedRecord(index=i, error=e) for i, e in outcome.rejected]
    if rejected and not outcome.rows:
        raise ValidationFailed(
            "records",
            f"all {len(rejected)} records were rejected",
            rejected=[r.model_dump() for r in rejected],
        )
    return Data(data=BatchResult(accepted=len(outcome.rows), rejected=rejected))


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _raise_invalid_envelope(body: bytes | None) -> NoReturn:
    errors: list[Any] = [
        {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
    ]
    if body is not None:
        try:
            RequestBatchIn.model_validate(body, from_attributes=True)
        except ValidationError as exc:
            errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
    raise RequestValidationError(errors)


@router.get("", response_model=Page[RequestListItem])
def list_requests(
    request: Request,
    project: Project,
    services: ServicesDep,
    limit: Limit = 20,
    cursor: Cursor = None,
    prompt_name: Annotated[str | None, Query(max_length=128)] = None,
    status: Literal["success", "error"] | None = None,
    start_date: Annotated[str | None, Query(max_length=40)] = None,
    end_date: Annotated[str | None, Query(max_length=40)] = None,
    trace_id: Annotated[
        str | None, Query(pattern=r"^[0-9a-f]{32}$", description="One trace's records.")
    ] = None,
    kind: Kind = None,
    environment: Environment = None,
) -> Page[RequestListItem]:
    """List records newest first; ``metadata.<key>=<value>`` parameters filter (ANDed).

    Model calls (``llm``, ``embedding``) unless ``kind`` names others; a trace's records
    (``trace_id``) are of every kind unless ``kind`` narrows them.
    """
    page = services.requests.list_page(
        project,
        limit,
        cursor,
        prompt_name=prompt_name,
        status=status,
        start_date=start_date,
        end_date=end_date,
        metadata=_metadata_params(request),
        trace_id=trace_id,
        kind=kind,
        environment=environment,
        score_params=[kv for kv in request.query_params.multi_items() if is_score_param(kv[0])],
    )
    scores = services.scores.summaries(project, [(r.id, r.trace_id) for r in page.rows])
    return Page(
        data=[RequestListItem.of_record(r, scores.get(r.id)) for r in page.rows],
        pagination=Pagination.of(page.next_cursor),
    )


def _metadata_params(request: Request) -> dict[str, str]:
    wanted: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key.startswith("metadata."):
            name = key.removeprefix("metadata.")
            if not name or len(name) > 128:
                raise ValidationFailed(key, "metadata filters are metadata.<key>=<value>")
            wanted[name] = value
    return wanted


@router.get("/search", response_model=Page[SearchHit])
def search_requests(
    project: Project,
    services: ServicesDep,
    query: Annotated[str, Query(min_length=1, max_length=200)],
    limit: Limit = 20,
    cursor: Cursor = None,
    kind: Kind = None,
    environment: Environment = None,
) -> Page[SearchHit]:
    """Find records whose input variables, output, metadata or input contain ``query``.

    Model calls only unless ``kind`` names others.
    """
    page = services.requests.search(project, query, limit, cursor, kind, environment)
    return Page(
        data=[SearchHit.of_runs(hit.row, hit.runs, as_html) for hit in page.hits],
        pagination=Pagination.of(page.next_cursor),
    )


# The parameters analytics take; any other (``limit``, ``score.<name>.min``…) is refused, not
# ignored: an answer "as if unfiltered" would read as the filtered one.
_ANALYTICS_PARAMS = (
    "metric",
    "group_by",
    "start_date",
    "end_date",
    "filters",
    "score_name",
    "prompt_name",
    "model",
    "status",
    "kind",
    "trace_id",
    "environment",
)


@router.get("/analytics", response_model=Data[AnalyticsResult], response_model_exclude_none=True)
def analytics(
    request: Request,
    project: Project,
    services: ServicesDep,
    metric: Annotated[str, Query(max_length=20)],
    group_by: Annotated[str | None, Query(max_length=140)] = None,
    start_date: Annotated[str | None, Query(max_length=40)] = None,
    end_date: Annotated[str | None, Query(max_length=40)] = None,
    filters: Annotated[str | None, Query(max_length=10_000, description="A JSON object")] = None,
    score_name: Annotated[
        str | None, Query(min_length=1, max_length=100, description="With metric=score.")
    ] = None,
    prompt_name: Annotated[str | None, Query(max_length=128)] = None,
    model: Annotated[str | None, Query(max_length=200)] = None,
    status: Literal["success", "error"] | None = None,
    kind: Kind = None,
    trace_id: Annotated[
        str | None, Query(pattern=r"^[0-9a-f]{32}$", description="One trace's records.")
    ] = None,
    environment: Environment = None,
) -> Data[AnalyticsResult]:
    """Aggregate cost, usage, latency, errors or a score's mean over a period, grouped.

    The request list's filters (``prompt_name``, ``model``, ``status``, ``kind``,
    ``trace_id``, ``metadata.<key>=<value>``) narrow it as ``filters`` does; an unknown
    parameter is a 400 naming it.
    """
    unknown = [
        key
        for key in dict.fromkeys(request.query_params.keys())
        if key not in _ANALYTICS_PARAMS and not key.startswith("metadata.")
    ]
    if unknown:
        raise ValidationFailed(
            unknown[0],
            f"analytics take no parameter {', '.join(unknown)}",
            unknown=unknown,
            allowed=[*_ANALYTICS_PARAMS, "metadata.<key>"],
        )
    params = ListFilters(
        prompt_name=prompt_name,
        model=model,
        status=status,
        kind=kind,
        trace_id=trace_id,
        environment=environment,
        metadata=_metadata_params(request),
    )
    outcome = services.analytics.run(
        project, metric, group_by, start_date, end_date, filters, score_name, params
    )
    return Data(data=AnalyticsResult.of(outcome))


@router.delete("", response_model=Data[DeleteResult])
def delete_requests(
    project: Project, services: ServicesDep, body: DeleteRequestsIn | None = None
) -> Data[DeleteResult]:
    """Delete every record whose metadata has all the given pairs (never everything)."""
    count, at = services.requests.delete(project, body.metadata if body else None)
    return Data(data=DeleteResult(deleted_count=count, deleted_at=at))


@router.get("/{request_id}", response_model=Data[RequestDetail])
def get_request(
    request_id: Annotated[str, Path(max_length=100)],
    project: Project,
    services: ServicesDep,
) -> Data[RequestDetail]:
    """Return one record with its model, timing and integration."""
    row, scores = services.requests.detail(project, request_id)
    evaluations = services.evaluation.decisions.on_target(project, "record", row.id)
    return Data(data=RequestDetail.of_record(row, scores, evaluations))
