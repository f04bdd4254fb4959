"""Template retrieval for local execution (spec 4.2), unwrapped."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.prompts import TemplateOut
from ...services.templates import template_payload
from ..deps import Project, ServicesDep
from .versions import VersionNumber

router = APIRouter(prefix="/prompts/{id}", tags=["templates"])


@router.get("/template", response_model=TemplateOut)
def latest_template(id: str, project: Project, services: ServicesDep) -> TemplateOut:
    """Return the newest version's template payload."""
    return template_payload(services.prompts.resolve_version(project, id))


@router.get("/versions/{version}/template", response_model=TemplateOut)
def version_template(
    id: str, version: VersionNumber, project: Project, services: ServicesDep
) -> TemplateOut:
    """Return a numbered version's template payload."""
    return template_payload(services.prompts.resolve_version(project, id, number=version))


@router.get("/versions/by-label/{label}/template", response_model=TemplateOut)
def label_template(id: str, label: str, project: Project, services: ServicesDep) -> TemplateOut:
    """Return the template payload of the version carrying a label (``latest``: newest)."""
    return template_payload(services.prompts.resolve_version(project, id, label=label))
