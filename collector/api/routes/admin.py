"""Local administration for ``promptrail keys ...`` while a collector holds the store.

The embedded store belongs to one process, so the CLI asks the running collector instead.
The admin token lives only in the collector's runtime file inside the data dir (mode 0600):
whoever can read it could read the store's files anyway. Every route here needs it; a
collector started without one (not by ``promptrail serve``) refuses them all.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request

from ...errors import InvalidApiKey
from ...models.keys import (
    KeyCreate,
    KeyCreated,
    KeyCreatedData,
    KeyData,
    KeyList,
    KeyOut,
    KeyRevoke,
    KeyRotate,
    KeyRotated,
    KeyRotatedData,
)
from ..deps import ServicesDep


async def require_admin(
    request: Request, x_promptrail_admin: Annotated[str | None, Header()] = None
) -> None:
    """Refuse the request unless it carries this collector's admin token."""
    token: str | None = getattr(request.app.state, "admin_token", None)
    if not token or not x_promptrail_admin or not hmac.compare_digest(token, x_promptrail_admin):
        raise InvalidApiKey("Admin token required")


router = APIRouter(
    prefix="/admin", tags=["admin"], include_in_schema=False, dependencies=[Depends(require_admin)]
)


@router.post("/keys", status_code=201, response_model=KeyCreatedData)
def create_key(body: KeyCreate, services: ServicesDep) -> KeyCreatedData:
    """Create an API key for a project."""
    return KeyCreatedData(
        data=KeyCreated(project=body.project, api_key=services.keys.create(body.project))
    )


@router.get("/keys", response_model=KeyList)
def list_keys(
    services: ServicesDep, project: str | None = None, include_revoked: bool = False
) -> KeyList:
    """List the keys (of one project), with when each was last used; never a key."""
    keys = services.keys.list_keys(project or None, include_revoked)
    return KeyList(data=[KeyOut.model_validate(info) for info in keys])


@router.post("/keys/revoke", response_model=KeyData)
def revoke_key(body: KeyRevoke, services: ServicesDep) -> KeyData:
    """Revoke a key, given by id or as the key: refused from the next request on."""
    return KeyData(data=KeyOut.model_validate(services.keys.revoke(body.key)))


@router.post("/keys/rotate", response_model=KeyRotatedData)
def rotate_keys(body: KeyRotate, services: ServicesDep) -> KeyRotatedData:
    """Make a new key for a project; its other keys stop working after the grace period."""
    rotated = services.keys.rotate(body.project, body.grace_seconds)
    return KeyRotatedData(data=KeyRotated.model_validate(rotated))
