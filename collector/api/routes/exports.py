"""Exports (spec 4.5, docs/api-notes.md, "Request log"): start a job, check it, download the
file."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from ...models.envelopes import Data
from ...models.requests import ExportCreate, ExportOut
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/requests", tags=["exports"])

_MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/x-ndjson"}


def _download_url(request: Request) -> Callable[[str], str]:
    """Return where an export of this request's API root is downloaded."""
    return lambda export_id: str(request.url_for("download_export", export_id=export_id))


@router.post("/export", status_code=201, response_model=Data[ExportOut])
def create_export(
    body: ExportCreate, request: Request, project: Project, services: ServicesDep
) -> Data[ExportOut]:
    """Start exporting matching records as CSV or JSON lines."""
    job = services.exports.create(project, body)
    return Data(data=ExportOut.of_job(job, _download_url(request)))


@router.get("/exports/{export_id}", response_model=Data[ExportOut])
def get_export(
    export_id: str, request: Request, project: Project, services: ServicesDep
) -> Data[ExportOut]:
    """Return an export's status (``download_url`` is set once completed)."""
    job = services.exports.get(project, export_id)
    return Data(data=ExportOut.of_job(job, _download_url(request)))


@router.get(
    "/exports/{export_id}/download",
    name="download_export",
    response_class=FileResponse,
    responses={200: {"content": {"text/csv": {}, "application/x-ndjson": {}}}},
)
def download_export(export_id: str, project: Project, services: ServicesDep) -> FileResponse:
    """Download a completed export."""
    job, path = services.exports.file_of(project, export_id)
    extension = "csv" if job.format == "csv" else "jsonl"
    return FileResponse(
        path, media_type=_MEDIA_TYPES[job.format], filename=f"{export_id}.{extension}"
    )
