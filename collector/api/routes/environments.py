"""Environments (docs/api-notes.md, "Environments"): where the project's records were logged."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.envelopes import Data
from ...models.requests import EnvironmentOut
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/environments", tags=["requests"])


@router.get("", response_model=Data[list[EnvironmentOut]])
def list_environments(project: Project, services: ServicesDep) -> Data[list[EnvironmentOut]]:
    """Every environment of the project's records (the service's own too), by name, with
    how many records each holds."""
    found = services.requests.environments(project)
    return Data(data=[EnvironmentOut(name=name, records=count) for name, count in found])
