"""A project's API keys for its admins (docs/api-notes.md, "Keys and scopes"): make one with
scopes and an expiry, list them; never a key but once, when it is made."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ...access.permissions import held_scopes
from ...access.principal import SCOPES, Principal
from ...errors import InsufficientScope
from ...models.envelopes import Data
from ...models.keys import KeyCreated, KeyOut, NewKey
from ..access import signed_in_user
from ..audit_hook import note_created
from ..deps import CurrentPrincipal, ServicesDep

router = APIRouter(prefix="/keys", tags=["keys"])


@router.post("", status_code=201, response_model=Data[KeyCreated])
def create_key(
    body: NewKey, request: Request, principal: CurrentPrincipal, services: ServicesDep
) -> Data[KeyCreated]:
    """Make a key of the caller's project with no more scopes than the caller holds."""
    held = held_scopes(principal.scopes, principal.role)
    for scope in SCOPES:  # the first the caller lacks, in the docs' order
        if scope in body.scopes and scope not in held:
            raise InsufficientScope(scope)
    issued = services.keys.issue(
        principal.project,
        body.scopes,
        expires_in=body.expires_in if isinstance(body.expires_in, int) else None,
        created_by=_maker(request, principal),
        name=body.name,
    )
    info = issued.info
    note_created(request, info.key_id)  # the audit entry's id (api/audit_hook.py)
    return Data(
        data=KeyCreated(
            project=info.project,
            api_key=issued.api_key,
            key_id=info.key_id,
            scopes=info.scopes,
            expires_at=info.expires_at,
            name=info.name,
        )
    )


@router.get("", response_model=Data[list[KeyOut]])
def list_keys(
    principal: CurrentPrincipal, services: ServicesDep, include_revoked: bool = False
) -> Data[list[KeyOut]]:
    """The project's keys, oldest first: scopes, maker, last use, expiry; never a key."""
    keys = services.keys.list_keys(principal.project, include_revoked)
    return Data(data=[KeyOut.model_validate(info) for info in keys])


def _maker(request: Request, principal: Principal) -> str:
    """Who makes a key, as its list shows: the user's e-mail, or the making key's id."""
    user = signed_in_user(request)
    if user is not None:
        return user.email
    return principal.key_id or ""
