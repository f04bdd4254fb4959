"""A project's members and their roles (docs/api-notes.md, "Accounts")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from ...access.principal import Principal
from ...models.accounts import MemberIn, MemberOut
from ...models.envelopes import Data
from ...services.accounts import Actor
from ..deps import CurrentPrincipal, ServicesDep

router = APIRouter(prefix="/projects/{project}/members", tags=["members"])

ProjectName = Annotated[str, Path(min_length=1, max_length=64)]
Email = Annotated[str, Path(min_length=1, max_length=320)]


def _actor(principal: Principal) -> Actor:
    # Inside a project an instance admin acts by its role there, like everyone; a key by its
    # scopes (``admin`` manages members, never owners or admins).
    return Actor(role=principal.role, scopes=principal.scopes, user_id=principal.user_id)


@router.get("", response_model=Data[list[MemberOut]])
def list_members(
    project: ProjectName, principal: CurrentPrincipal, services: ServicesDep
) -> Data[list[MemberOut]]:
    """List a project's members, their roles and where each role came from (admin)."""
    members = services.accounts.members.list(project, _actor(principal))
    return Data(data=[MemberOut.model_validate(m) for m in members])


@router.put("/{email}", response_model=Data[MemberOut])
def put_member(
    project: ProjectName,
    email: Email,
    body: MemberIn,
    principal: CurrentPrincipal,
    services: ServicesDep,
) -> Data[MemberOut]:
    """Add a user (by e-mail) to a project or change its role (admin; only an owner gives,
    changes or takes the owner or admin role). The role is ``manual``: SSO keeps it."""
    member = services.accounts.members.put(project, email, body.role, _actor(principal))
    return Data(data=MemberOut.model_validate(member))


@router.delete("/{email}", response_model=Data[MemberOut])
def delete_member(
    project: ProjectName, email: Email, principal: CurrentPrincipal, services: ServicesDep
) -> Data[MemberOut]:
    """Take a user out of a project (admin; only an owner removes an owner or an admin);
    answers the member it was. A project keeps at least one owner."""
    member = services.accounts.members.remove(project, email, _actor(principal))
    return Data(data=MemberOut.model_validate(member))
