"""``GET /health``: no key needed; 200 once the store answers and takes records."""

from __future__ import annotations

from fastapi import APIRouter

from ...errors import StoreUnavailable
from ...models.envelopes import ERROR_RESPONSES, Health
from ..deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health, responses={503: ERROR_RESPONSES[503]})
def health(services: ServicesDep) -> Health:
    """Report whether the collector is ready: its store answers and takes records.

    Not ready (503, the contract's error body) while the store does not answer, its writes
    fail ("store writes failing since ...: <error>"), or the ingest buffer is full and not
    draining ("ingest buffer full: ..."); ready again by itself once the store is back.
    """
    retry_after = services.settings.store_retry_after_seconds
    try:
        services.store.ping()
    except Exception as exc:
        raise StoreUnavailable(f"Store not ready: {exc}", retry_after=retry_after) from exc
    refusal = services.ingest.refusal()
    if refusal is not None:
        raise type(refusal)(f"Not ready: {refusal.message}", refusal.details, retry_after)
    return Health(status="ok")
