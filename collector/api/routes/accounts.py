"""User accounts, made and changed by an instance admin (``/v1/users/accounts``), and the
loopback route of ``promptrail users create`` (docs/api-notes.md, "Accounts")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from ...errors import Forbidden
from ...models.accounts import AccountIn, AccountPatch, UserOut
from ...models.envelopes import Data
from ..deps import ServicesDep, require_admin
from .auth import CurrentUser

router = APIRouter(prefix="/users/accounts", tags=["accounts"])

# ``promptrail users create`` while a collector holds the embedded store (as admin.py's keys).
admin_router = APIRouter(
    prefix="/admin/users",
    tags=["admin"],
    include_in_schema=False,
    dependencies=[Depends(require_admin)],
)

Email = Annotated[str, Path(min_length=1, max_length=320)]


def _instance_admin(user: CurrentUser) -> None:
    if not user.instance_admin:
        raise Forbidden("Only an instance admin manages users", {"required_role": "instance_admin"})


InstanceAdmin = Depends(_instance_admin)


@router.post("", status_code=201, response_model=Data[UserOut], dependencies=[InstanceAdmin])
def create_account(body: AccountIn, services: ServicesDep) -> Data[UserOut]:
    """Create a user (instance admin); without a password it signs in only by SSO.

    409 USER_ALREADY_EXISTS for an address in use, whatever its case.
    """
    user = services.accounts.create_user(body.email, body.password, body.name, body.instance_admin)
    return Data(data=UserOut.model_validate(user))


@router.get("", response_model=Data[list[UserOut]], dependencies=[InstanceAdmin])
def list_accounts(services: ServicesDep) -> Data[list[UserOut]]:
    """List every user, oldest first (instance admin)."""
    return Data(data=[UserOut.model_validate(u) for u in services.accounts.users.list()])


@router.patch("/{email}", response_model=Data[UserOut], dependencies=[InstanceAdmin])
def update_account(email: Email, body: AccountPatch, services: ServicesDep) -> Data[UserOut]:
    """Change a user's name or password, or disable or enable it (instance admin).

    Disabling a user, or giving it a new password, ends its sessions at once.
    """
    user = services.accounts.users.update(
        email, name=body.name, password=body.password, disabled=body.disabled
    )
    return Data(data=UserOut.model_validate(user))


@admin_router.post("", status_code=201, response_model=Data[UserOut])
def create_account_locally(body: AccountIn, services: ServicesDep) -> Data[UserOut]:
    """Create a user for ``promptrail users create`` (the runtime file's admin token)."""
    user = services.accounts.create_user(body.email, body.password, body.name, body.instance_admin)
    return Data(data=UserOut.model_validate(user))
