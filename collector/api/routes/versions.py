"""Version history and rollback (spec 4.4)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel

from ...models.prompts import RollbackOut, RollbackRequest, VersionDetailOut, VersionOut
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts/{name}", tags=["versions"])

VersionNumber = Annotated[int, Path(ge=1, le=2**31)]


class VersionListData(BaseModel):
    """``data`` = versions, newest first."""

    data: list[VersionOut]


class VersionData(BaseModel):
    """``data`` = one version."""

    data: VersionDetailOut


class RollbackData(BaseModel):
    """``data`` = the rollback's new version."""

    data: RollbackOut


@router.get("/versions", response_model=VersionListData)
def list_versions(name: str, project: Project, services: ServicesDep) -> VersionListData:
    """Return every version of a prompt, newest first."""
    return VersionListData(
        data=[
            VersionOut(
                version=v.row.version,
                template=v.row.template,
                model=v.row.model,
                labels=v.labels,
                note=v.row.note or None,
                created_at=v.row.created_at,
            )
            for v in services.prompts.versions(project, name)
        ]
    )


@router.get("/versions/{version}", response_model=VersionData)
def get_version(
    name: str, version: VersionNumber, project: Project, services: ServicesDep
) -> VersionData:
    """Return one version, with its parameters."""
    v = services.prompts.version(project, name, version)
    return VersionData(
        data=VersionDetailOut(
            version=v.row.version,
            template=v.row.template,
            model=v.row.model,
            parameters=v.row.parameters,
            labels=v.labels,
            note=v.row.note or None,
            created_at=v.row.created_at,
        )
    )


@router.post("/rollback", response_model=RollbackData)
def rollback(
    name: str, body: RollbackRequest, project: Project, services: ServicesDep
) -> RollbackData:
    """Make a new version with an earlier version's template, model and parameters."""
    row = services.prompts.rollback(project, name, body.version, body.labels)
    return RollbackData(data=RollbackOut(version=row.version, template=row.template, note=row.note))
