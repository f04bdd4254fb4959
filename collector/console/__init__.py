"""The web console: static HTML, CSS and JavaScript modules served by the collector.

The page at ``/`` is a shell; everything it shows comes from the public ``/v1`` API, called
as a signed-in user (the session cookie) or with the API key the user pasted (kept in the
browser's session storage, sent as a header). There is no build step and nothing loads from
another origin (collector/console/DESIGN.md). ``/console/sign-in.json`` tells the sign-in page
whether SSO is configured and whether this browser's session cookie is live, so that it asks
nothing the API would refuse.

Usage::

    from promptrail.collector.console import install_console
    install_console(app)   # GET / and /console/*
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC_DIR", "install_console"]

STATIC_DIR = Path(__file__).parent / "static"

# Scripts and styles only from the collector itself, and no inline script or style at all:
# record data rendered by mistake as markup still could not run or load anything.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # A new release's files must replace the old ones without a stale mix of modules.
    "Cache-Control": "no-cache",
}


class _ConsoleFiles(StaticFiles):
    """The console's static files, each answered with the console's security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path == SIGN_IN_STATE:
            response: Response = JSONResponse(_sign_in_state(Request(scope)))
            response.headers.update(_SECURITY_HEADERS)
            response.headers["Cache-Control"] = "no-store"
            return response
        response = await super().get_response(path, scope)
        response.headers.update(_SECURITY_HEADERS)
        return response


SIGN_IN_STATE = "sign-in.json"


def _sign_in_state(request: Request) -> dict[str, bool]:
    """What the sign-in page needs before asking the API anything: whether SSO is configured
    (its login route answers 404 otherwise) and whether this browser's session cookie is live
    (``GET /v1/auth/me`` answers 401 otherwise). The console asks these at every load, where a
    refusal would be a failed request in the browser's console."""
    # Imported here: the console package stays importable without the collector's services.
    from ..access.principal import SESSION_COOKIE

    services = getattr(request.app.state, "services", None)
    if services is None:
        return {"sso": False, "signed_in": False}
    sso = services.sso
    token = request.cookies.get(SESSION_COOKIE)
    live = bool(token) and services.accounts.sessions.resolve(token) is not None
    return {"sso": bool(sso is not None and sso.enabled), "signed_in": live}


async def _console_page() -> FileResponse:
    """``GET /``: the console's shell page."""
    return FileResponse(STATIC_DIR / "index.html", headers=_SECURITY_HEADERS)


def install_console(app: FastAPI) -> None:
    """Serve the console at ``/`` with its files under ``/console/``."""
    app.add_api_route("/", _console_page, include_in_schema=False)
    app.mount("/console", _ConsoleFiles(directory=STATIC_DIR), name="console")
