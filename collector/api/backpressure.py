"""Refuse ingest at the door while the store is not taking records (docs/deploy.md).

Once the insert buffer is full and not draining, or the store's writes fail, an ingest request
is answered 503 with ``Retry-After`` before its body is read: a client that keeps posting into a
stalled store costs the collector a few hundred bytes per request, never its body. Runs are
refused too, before their provider is called: their record could not be stored.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import contract_response

_PREFIXES = ("/v1/", "/api/v1/")
_INGEST = ("requests", "requests/batch", "traces")


def writes_records(method: str, path: str) -> bool:
    """Whether a request stores records: POST of /requests, /requests/batch, /traces, a run."""
    if method != "POST":
        return False
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            route = path[len(prefix) :].rstrip("/")
            return route in _INGEST or (route.startswith("prompts/") and route.endswith("/run"))
    return False


class IngestGateMiddleware:
    """Answer ingest requests 503 (``STORE_BUSY`` / ``STORE_UNAVAILABLE``) while refusing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and writes_records(scope["method"], scope["path"]):
            services = getattr(scope["app"].state, "services", None)
            refusal = services.ingest.refusal() if services is not None else None
            if refusal is not None:
                await contract_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
