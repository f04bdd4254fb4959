"""Exports (spec 4.5, CONTRACT 7): start a job, check it, download the file."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from ...models.requests import ExportCreate, ExportData, ExportOut
from ...store.exports import ExportJob
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/requests", tags=["exports"])

_MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/x-ndjson"}


def export_out(job: ExportJob, request: Request) -> ExportOut:
    """Shape a job; ``download_url`` only once the file is ready."""
    url = None
    if job.status == "completed":
        url = str(request.url_for("download_export", export_id=job.export_id))
    return ExportOut(
        export_id=job.export_id,
        status=job.status,
        download_url=url,
        created_at=job.created_at,
        format=job.format,
        row_count=job.row_count if job.status == "completed" else None,
        error=job.error or None,
    )


@router.post("/export", status_code=201, response_model=ExportData)
def create_export(
    body: ExportCreate, request: Request, project: Project, services: ServicesDep
) -> ExportData:
    """Start exporting matching records as CSV or JSON lines."""
    return ExportData(data=export_out(services.exports.create(project, body), request))


@router.get("/exports/{export_id}", response_model=ExportData)
def get_export(
    export_id: str, request: Request, project: Project, services: ServicesDep
) -> ExportData:
    """Return an export's status (``download_url`` is set once completed)."""
    return ExportData(data=export_out(services.exports.get(project, export_id), request))


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
