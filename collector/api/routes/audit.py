"""The audit log (docs/api-notes.md, "Audit log"): a project's entries for its admins, newest
first, and the loopback check of the whole chain for ``promptrail audit verify``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from ...errors import ValidationFailed
from ...models.envelopes import Data, Page, Pagination
from ...services.audit import AuditService
from ...store.audit import AuditFilter
from ..deps import Project, ServicesDep, require_admin

router = APIRouter(prefix="/audit", tags=["audit"])
admin_router = APIRouter(
    prefix="/admin/audit",
    tags=["admin"],
    include_in_schema=False,
    dependencies=[Depends(require_admin)],
)


def _service(services: ServicesDep) -> AuditService:
    assert services.audit is not None  # Services.build always sets it
    return services.audit


@router.get("", response_model=Page[dict[str, Any]])
async def list_audit(
    project: Project,
    services: ServicesDep,
    actor: Annotated[str | None, Query(max_length=200, description="An actor's id")] = None,
    resource_type: Annotated[str | None, Query(max_length=100)] = None,
    resource_id: Annotated[str | None, Query(max_length=1000)] = None,
    from_: Annotated[datetime | None, Query(alias="from")] = None,
    to: Annotated[datetime | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[dict[str, Any]]:
    """The project's audit entries, newest first (``from`` inclusive, ``to`` exclusive)."""
    for name, value in (("from", from_), ("to", to)):
        if value is not None and value.tzinfo is None:
            raise ValidationFailed(name, f"{name} needs a time zone (e.g. 2026-01-01T00:00:00Z)")
    where = AuditFilter(project, actor, resource_type, resource_id, from_, to)
    entries, next_cursor = await run_in_threadpool(_service(services).page, where, limit, cursor)
    return Page(data=entries, pagination=Pagination.of(next_cursor))


@admin_router.get("/verify", response_model=Data[dict[str, Any]])
def verify_audit(services: ServicesDep) -> Data[dict[str, Any]]:
    """Recompute the chain on the collector's store (for ``promptrail audit verify``)."""
    verdict = _service(services).verify()
    return Data(data=verdict.as_json())
