"""``GET /health``: no key needed; 200 once the store answers."""

from __future__ import annotations

from fastapi import APIRouter

from ...errors import StoreUnavailable
from ...models.envelopes import Health
from ..deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
def health(services: ServicesDep) -> Health:
    """Report whether the collector and its store are ready."""
    try:
        services.store.ping()
    except Exception as exc:
        raise StoreUnavailable(f"Store not ready: {exc}") from exc
    return Health(status="ok")
