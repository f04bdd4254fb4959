"""Template retrieval for local execution (spec 4.2), unwrapped."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ...models.prompts import TemplateOut
from ..deps import Project, ServicesDep
from .prompts import read_version
from .versions import VersionNumber

router = APIRouter(prefix="/prompts/{id}", tags=["templates"])


@router.get("/template", response_model=TemplateOut)
async def latest_template(id: str, project: Project, services: ServicesDep) -> Response:
    """Return the newest version's template payload."""
    return await read_version(services, project, id, "template")


@router.get("/versions/{version}/template", response_model=TemplateOut)
async def version_template(
    id: str, version: VersionNumber, project: Project, services: ServicesDep
) -> Response:
    """Return a numbered version's template payload."""
    return await read_version(services, project, id, "template", number=version)


@router.get("/versions/by-label/{label}/template", response_model=TemplateOut)
async def label_template(id: str, label: str, project: Project, services: ServicesDep) -> Response:
    """Return the template payload of the version carrying a label (``latest``: newest)."""
    return await read_version(services, project, id, "template", label=label)
