"""Local administration for ``promptrail keys ...`` while a collector holds the store.

The embedded store belongs to one process, so the CLI asks the running collector instead.
The admin token lives only in the collector's runtime file inside the data dir (mode 0600):
whoever can read it could read the store's files anyway. Every route here needs it; a
collector started without one (not by ``promptrail serve``) refuses them all.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ...models.envelopes import Data
from ...models.keys import KeyCreate, KeyCreated, KeyOut, KeyRevoke, KeyRotate, KeyRotated
from ...services.keys import created_key
from ..deps import ServicesDep, require_admin

router = APIRouter(
    prefix="/admin", tags=["admin"], include_in_schema=False, dependencies=[Depends(require_admin)]
)


@router.post("/keys", status_code=201, response_model=Data[KeyCreated])
def create_key(body: KeyCreate, services: ServicesDep) -> Data[KeyCreated]:
    """Create an API key for a project (every scope unless ``scopes`` says)."""
    return Data(data=created_key(services.keys, body))


@router.get("/keys", response_model=Data[list[KeyOut]])
def list_keys(
    services: ServicesDep, project: str | None = None, include_revoked: bool = False
) -> Data[list[KeyOut]]:
    """List the keys (of one project), with when each was last used; never a key."""
    keys = services.keys.list_keys(project or None, include_revoked)
    return Data(data=[KeyOut.model_validate(info) for info in keys])


@router.post("/keys/revoke", response_model=Data[KeyOut])
def revoke_key(body: KeyRevoke, services: ServicesDep) -> Data[KeyOut]:
    """Revoke a key, given by id or as the key: refused from the next request on."""
    return Data(data=KeyOut.model_validate(services.keys.revoke(body.key)))


@router.post("/keys/rotate", response_model=Data[KeyRotated])
def rotate_keys(body: KeyRotate, services: ServicesDep) -> Data[KeyRotated]:
    """Make a new key for a project; its other keys stop working after the grace period."""
    rotated = services.keys.rotate(body.project, body.grace_seconds)
    return Data(data=KeyRotated.model_validate(rotated))
