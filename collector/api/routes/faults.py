"""``/admin/store/stall`` and ``/admin/store/resume``: stall the running collector's store.

Served only with ``PROMPTRAIL_FAULT_INJECTION=1`` and the admin token of the runtime file (as
``/admin/keys``): the embedded store lives inside the collector, so a test or benchmark outside
it asks it to stall its own log (:mod:`..store.faults`, real ClickHouse insert limits).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, Field

from ...errors import InvalidApiKey
from ...store.faults import StallMode, resume_writes, stall_writes
from ..deps import ServicesDep

router = APIRouter(prefix="/admin/store", tags=["admin"], include_in_schema=False)

AdminToken = Annotated[str | None, Header(alias="X-Promptrail-Admin")]


class Stall(BaseModel):
    """How the log's inserts should misbehave."""

    mode: StallMode
    seconds: float = Field(default=5.0, gt=0, le=3600)


class StallState(BaseModel):
    """What the store does now."""

    stalled: bool
    mode: StallMode | None = None


class StallData(BaseModel):
    """``data`` = the store's stall state."""

    data: StallState


def _check_admin(request: Request, given: str | None) -> None:
    token: str | None = getattr(request.app.state, "admin_token", None)
    if not token or not given or not hmac.compare_digest(token, given):
        raise InvalidApiKey("Admin token required")


@router.post("/stall", response_model=StallData)
def stall(
    body: Stall, request: Request, services: ServicesDep, token: AdminToken = None
) -> StallData:
    """Make the log's inserts fail (TOO_MANY_PARTS) or wait ``seconds``, or detach it."""
    _check_admin(request, token)
    stall_writes(services.store.client, services.store.database, body.mode, body.seconds)
    return StallData(data=StallState(stalled=True, mode=body.mode))


@router.post("/resume", response_model=StallData)
def resume(request: Request, services: ServicesDep, token: AdminToken = None) -> StallData:
    """Give the request log's inserts ClickHouse's default limits back."""
    _check_admin(request, token)
    resume_writes(services.store.client, services.store.database)
    return StallData(data=StallState(stalled=False))
