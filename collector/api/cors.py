"""CORS for the feedback route: a browser on any origin may post an end user's vote.

Only ``/v1/feedback/...`` (and ``/api/v1/feedback/...``) answers cross-origin: it takes no key
and reads nothing, so ``Access-Control-Allow-Origin: *`` exposes nothing. Every answer of the
route carries the header, errors included (they are written by the exception handlers, after
the route), and a preflight ``OPTIONS`` is answered here without reaching the router.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_PREFIXES = ("/v1/feedback/", "/api/v1/feedback/")
_PREFLIGHT = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, OPTIONS"),
    (b"access-control-allow-headers", b"Content-Type"),
    (b"access-control-max-age", b"86400"),
    (b"content-length", b"0"),
]


def is_feedback_path(path: str) -> bool:
    """Whether ``path`` is the keyless feedback route."""
    return path.startswith(_PREFIXES)


class FeedbackCorsMiddleware:
    """Answer the feedback route's preflight; add ``Access-Control-Allow-Origin: *`` to it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_feedback_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": _PREFLIGHT})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_origin(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["Access-Control-Allow-Origin"] = "*"
            await send(message)

        await self.app(scope, receive, send_with_origin)
