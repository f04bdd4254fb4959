"""Refuse ingest at the door while the store is not taking records (docs/deploy.md).

Once the insert buffer is full and not draining, or the store's writes fail, an ingest request
is answered 503 with ``Retry-After`` before its body is read: a client that keeps posting into a
stalled store costs the collector a few hundred bytes per request, never its body.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import contract_response

_PREFIXES = ("/v1/", "/api/v1/")
_INGEST = ("requests", "requests/batch", "traces")


def is_ingest(method: str, path: str) -> bool:
    """Whether a request logs records: POST of /requests, /requests/batch or /traces."""
    if method != "POST":
        return False
    for prefix in _PREFIXES:
        if path.startswith(prefix):
            return path[len(prefix) :].rstrip("/") in _INGEST
    return False


class IngestGateMiddleware:
    """Answer ingest requests 503 (``STORE_BUSY`` / ``STORE_UNAVAILABLE``) while refusing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_ingest(scope["method"], scope["path"]):
            services = getattr(scope["app"].state, "services", None)
            refusal = services.ingest.refusal() if services is not None else None
            if refusal is not None:
                await contract_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
