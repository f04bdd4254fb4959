"""Traces: OTLP/HTTP ingest (docs/api-notes.md, "Request log") and the trace list and detail
(docs/api-notes.md, "Traces, sessions and users")."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ...models.envelopes import ErrorBody, Page, Pagination
from ...models.requests import EvaluationOut, RequestListItem
from ...models.traces import TraceDetail, TraceListItem, TracePage
from ...services.otlp import JSON, PROTOBUF, encoding_of
from ..deps import IngestProject, Project, ServicesDep
from .requests import Environment

Limit = Annotated[int, Query(ge=1, le=100)]
# A trace's page (issue 32): a trace of up to 500 records is one page by default, and up to
# 1,000 a page when asked; a bigger one pages by cursor. The contract bounds only lists' and
# sessions' pages at 100; docs/api-notes.md ("A trace's pages") says why these numbers.
TracePageLimit = Annotated[int, Query(ge=1, le=1000)]
Cursor = Annotated[str | None, Query(max_length=2000)]
Date = Annotated[str | None, Query(max_length=40)]

router = APIRouter(tags=["traces"])

_BINARY: dict[str, Any] = {"type": "string", "format": "binary"}
_REQUEST_EXAMPLE: dict[str, Any] = {
    "resourceSpans": [
        {
            "resource": {
                "attributes": [{"key": "service.name", "value": {"stringValue": "my-app"}}]
            },
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "traceId": "5b8efff798038103d269b633813fc60c",
                            "spanId": "eee19b7ec3c1b174",
                            "name": "chat gpt-4o-mini",
                            "kind": 3,
                            "startTimeUnixNano": "1700000000000000000",
                            "endTimeUnixNano": "1700000000750000000",
                            "attributes": [
                                {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                                {
                                    "key": "gen_ai.request.model",
                                    "value": {"stringValue": "gpt-4o-mini"},
                                },
                                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
                            ],
                            "status": {},
                        }
                    ]
                }
            ],
        }
    ]
}
_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": "An OTLP `ExportTraceServiceRequest`, as protobuf or as OTLP JSON (hex ids, "
    "camelCase names, 64-bit integers as strings). `Content-Encoding: gzip` is accepted.",
    "content": {
        PROTOBUF: {"schema": _BINARY},
        JSON: {
            "schema": {
                "type": "object",
                "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
            },
            "example": _REQUEST_EXAMPLE,
        },
    },
}
_RESPONSE_JSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "partialSuccess": {
            "type": "object",
            "properties": {
                "rejectedSpans": {"type": "string", "description": "int64, as a string"},
                "errorMessage": {"type": "string"},
            },
        }
    },
}


@router.post(
    "/traces",
    response_class=Response,
    summary="Ingest an OTLP/HTTP trace export",
    openapi_extra={"requestBody": _REQUEST_BODY},
    responses={
        200: {
            "description": "An `ExportTraceServiceResponse` in the request's encoding; "
            "`partial_success` counts the model-call spans that could not be stored.",
            "content": {PROTOBUF: {"schema": _BINARY}, JSON: {"schema": _RESPONSE_JSON}},
        },
        415: {"model": ErrorBody, "description": "UNSUPPORTED_MEDIA_TYPE"},
    },
)
async def export_traces(
    request: Request, project: IngestProject, services: ServicesDep
) -> Response:
    """Store each span carrying GenAI, OpenInference or promptrail attributes as a record.

    Other spans are skipped (not an error). A span with status ERROR becomes a record with
    status `error`. The record id derives from the trace and span ids, so a re-exported span
    is stored once.
    """
    encoding = encoding_of(request.headers.get("content-type"))
    body = await request.body()
    answer, stored = await run_in_threadpool(services.otlp.export, project, body, encoding)
    services.rate_limits.charge_ingest(project, stored, len(body))
    return Response(answer, media_type=encoding)


@router.get("/traces", response_model=Page[TraceListItem])
def list_traces(
    project: Project,
    services: ServicesDep,
    limit: Limit = 20,
    cursor: Cursor = None,
    start_date: Date = None,
    end_date: Date = None,
    user_id: Annotated[str | None, Query(max_length=1000)] = None,
    session_id: Annotated[str | None, Query(max_length=1000)] = None,
    name: Annotated[str | None, Query(max_length=256, description="Root span name.")] = None,
    environment: Environment = None,
) -> Page[TraceListItem]:
    """List traces newest first (by their first record), with sums over all their records."""
    page = services.traces.trace_page(
        project,
        limit,
        cursor,
        start_date=start_date,
        end_date=end_date,
        user_id=user_id,
        session_id=session_id,
        name=name,
        environment=environment,
    )
    return Page(
        data=[TraceListItem.of(summary, scores=scores) for summary, scores in page.items],
        pagination=Pagination.of(page.next_cursor),
    )


@router.get("/traces/{trace_id}", response_model=TracePage)
def get_trace(
    trace_id: Annotated[str, Path(max_length=100)],
    project: Project,
    services: ServicesDep,
    limit: TracePageLimit = 500,
    cursor: Cursor = None,
) -> TracePage:
    """One trace with its records of every kind, oldest first: page on through ``cursor``."""
    found = services.traces.trace(project, trace_id, limit, cursor)
    return TracePage(
        data=TraceDetail.of(
            found.summary,
            scores=found.scores,
            items=[RequestListItem.of_record(r, found.row_scores.get(r.id)) for r in found.rows],
            evaluations=[
                EvaluationOut.model_validate(e, from_attributes=True)
                for e in services.evaluation.decisions.on_target(project, "trace", trace_id)
            ],
        ),
        pagination=Pagination.of(found.next_cursor),
    )
