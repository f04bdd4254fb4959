"""Local administration for ``promptrail backup`` while a collector holds the embedded store.

The embedded store belongs to one process, so the CLI asks the running collector to back it
up: it starts a job here and follows it to the end. The admin token is the one of
``POST /v1/admin/keys`` (see ``admin.py``). Restores are not offered: a restore replaces what
the running collector has cached (see docs/deploy.md), so it runs with the collector stopped.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ...models.envelopes import Data
from ...services.backups import BackupJob
from ..deps import ServicesDep, require_admin

router = APIRouter(
    prefix="/admin/backups",
    tags=["admin"],
    include_in_schema=False,
    dependencies=[Depends(require_admin)],
)


class BackupCreate(BaseModel):
    """Where the backup goes: an absolute path on the collector's machine, new or empty."""

    directory: str = Field(min_length=1, max_length=4096)


class BackupJobOut(BaseModel):
    """A backup job: ``status`` is running, completed or failed (with ``error``)."""

    job_id: str
    directory: str
    status: str
    error: str | None
    total_bytes: int
    done_bytes: int


def _out(job: BackupJob) -> Data[BackupJobOut]:
    return Data(
        data=BackupJobOut(
            job_id=job.job_id,
            directory=job.directory,
            status=job.status,
            error=job.error or None,
            total_bytes=job.total_bytes,
            done_bytes=job.done_bytes,
        )
    )


@router.post("", status_code=202, response_model=Data[BackupJobOut])
def start_backup(body: BackupCreate, services: ServicesDep) -> Data[BackupJobOut]:
    """Start backing up the store into a new or empty directory."""
    return _out(services.backups.start_backup(Path(body.directory)))


@router.get("/{job_id}", response_model=Data[BackupJobOut])
def get_backup(job_id: str, services: ServicesDep) -> Data[BackupJobOut]:
    """Return how far a backup got and how it ended."""
    return _out(services.backups.job(job_id))
