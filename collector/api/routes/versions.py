"""Version history and rollback (spec 4.4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ...models.envelopes import Data, Page, Pagination
from ...models.prompts import RollbackOut, RollbackRequest, VersionDetailOut, VersionOut
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts/{name}", tags=["versions"])

VersionNumber = Annotated[int, Path(ge=1, le=2**31)]


@router.get("/versions", response_model=Page[VersionOut])
def list_versions(
    name: str,
    project: Project,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
) -> Page[VersionOut]:
    """List a prompt's versions, newest first, a page at a time."""
    page = services.prompts.versions_page(project, name, limit, cursor)
    return Page(
        data=[VersionOut.of(v.row, labels=v.labels) for v in page.items],
        pagination=Pagination.of(page.next_cursor),
    )


@router.get("/versions/{version}", response_model=Data[VersionDetailOut])
def get_version(
    name: str, version: VersionNumber, project: Project, services: ServicesDep
) -> Data[VersionDetailOut]:
    """Return one version, with its parameters."""
    found = services.prompts.version(project, name, version)
    return Data(data=VersionDetailOut.of(found.row, labels=found.labels))


@router.post("/rollback", response_model=Data[RollbackOut])
def rollback(
    name: str, body: RollbackRequest, project: Project, services: ServicesDep
) -> Data[RollbackOut]:
    """Make a new version with an earlier version's template, model and parameters."""
    row = services.prompts.rollback(project, name, body.version, body.labels)
    return Data(data=RollbackOut.of(row))
