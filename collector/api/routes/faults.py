"""``/admin/store/stall`` and ``/admin/store/resume``: stall the running collector's store.

Served only with ``PROMPTRAIL_FAULT_INJECTION=1`` and the admin token of the runtime file (as
``/admin/keys``): the embedded store lives inside the collector, so a test or benchmark outside
it asks it to stall its own log (:mod:`..store.faults`, real ClickHouse insert limits).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from ...models.envelopes import Data
from ...services.faults import StallMode
from ..deps import ServicesDep, require_admin

router = APIRouter(
    prefix="/admin/store",
    tags=["admin"],
    include_in_schema=False,
    dependencies=[Depends(require_admin)],
)


class Stall(BaseModel):
    """How the log's inserts should misbehave."""

    mode: StallMode
    seconds: float = Field(default=5.0, gt=0, le=3600)


class StallState(BaseModel):
    """What the store does now."""

    stalled: bool
    mode: StallMode | None = None


@router.post("/stall", response_model=Data[StallState])
def stall(body: Stall, services: ServicesDep) -> Data[StallState]:
    """Make the log's inserts fail (TOO_MANY_PARTS) or wait ``seconds``, or detach it."""
    services.faults.stall(body.mode, body.seconds)
    return Data(data=StallState(stalled=True, mode=body.mode))


@router.post("/resume", response_model=Data[StallState])
def resume(services: ServicesDep) -> Data[StallState]:
    """Give the request log's inserts ClickHouse's default limits back."""
    services.faults.resume()
    return Data(data=StallState(stalled=False))
