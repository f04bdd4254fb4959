"""OTLP/HTTP trace ingest (CONTRACT 6): model-call spans become request records."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from ...models.envelopes import ErrorBody
from ...services.otlp import JSON, PROTOBUF, encoding_of
from ..deps import IngestProject, ServicesDep

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
