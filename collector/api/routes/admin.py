"""Local administration for ``promptrail keys create`` while a collector holds the store.

The embedded store belongs to one process, so the CLI asks the running collector instead.
The admin token lives only in the collector's runtime file inside the data dir (mode 0600):
whoever can read it could read the store's files anyway.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, Field

from ...errors import InvalidApiKey
from ..deps import ServicesDep

router = APIRouter(prefix="/admin", tags=["admin"], include_in_schema=False)


class KeyCreate(BaseModel):
    """Which project the new key belongs to."""

    project: str = Field(min_length=1, max_length=64)


class KeyCreated(BaseModel):
    """The new key, shown once."""

    project: str
    api_key: str


class KeyCreatedData(BaseModel):
    """``data`` = the new key."""

    data: KeyCreated


@router.post("/keys", status_code=201, response_model=KeyCreatedData)
def create_key(
    body: KeyCreate,
    request: Request,
    services: ServicesDep,
    x_promptrail_admin: Annotated[str | None, Header()] = None,
) -> KeyCreatedData:
    """Create an API key for a project (admin token required)."""
    token: str | None = getattr(request.app.state, "admin_token", None)
    if not token or not x_promptrail_admin or not hmac.compare_digest(token, x_promptrail_admin):
        raise InvalidApiKey("Admin token required")
    return KeyCreatedData(
        data=KeyCreated(project=body.project, api_key=services.keys.create(body.project))
    )
