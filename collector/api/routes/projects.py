"""Projects: an instance admin creates one and becomes its owner; a signed-in user lists its own
(docs/api-notes.md, "Accounts")."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.accounts import ProjectIn, ProjectOut
from ...models.envelopes import Data
from ..deps import ServicesDep
from .auth import CurrentUser

router = APIRouter(prefix="/projects", tags=["projects"])


@router.post("", status_code=201, response_model=Data[ProjectOut])
def create_project(body: ProjectIn, user: CurrentUser, services: ServicesDep) -> Data[ProjectOut]:
    """Create a project (instance admin only); its creator becomes its owner.

    409 PROJECT_ALREADY_EXISTS for a project that exists with members.
    """
    row = services.accounts.projects.create(body.name, user.user_id, user.instance_admin)
    return Data(data=ProjectOut(name=row.name, created_at=row.created_at, role="owner"))


@router.get("", response_model=Data[list[ProjectOut]])
def list_projects(user: CurrentUser, services: ServicesDep) -> Data[list[ProjectOut]]:
    """The signed-in user's projects and its role in each, the default (first) first."""
    projects = services.accounts.projects.of_user(user.user_id)
    return Data(
        data=[
            ProjectOut(name=name, role=role, created_at=row.created_at if row else None)
            for name, role, row in projects
        ]
    )
