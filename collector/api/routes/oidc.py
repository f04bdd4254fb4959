"""Sign-in with an OpenID Connect provider: ``/v1/auth/oidc/login`` and ``/callback``
(docs/api-notes.md, "Accounts"; docs/security.md, "SSO").

Both routes are public (a browser not yet signed in calls them). The callback sets the same
session cookie as a password sign-in and sends the browser to the console; a refused sign-in
answers 403 FORBIDDEN and sets no session.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse

from ...access.principal import SESSION_COOKIE
from ...errors import NotFound
from ...services.container import Services
from ...services.sso import SsoService
from ...services.sso.flow_state import FLOW_COOKIE, FLOW_COOKIE_PATH, FLOW_SECONDS
from ..deps import ServicesDep

router = APIRouter(prefix="/auth/oidc", tags=["auth"])

CONSOLE_PATH = "/"


def _sso(services: Services) -> SsoService:
    if services.sso is None or not services.sso.enabled:
        raise NotFound("SSO is not configured (docs/deploy.md, PROMPTRAIL_OIDC_ISSUER)")
    return services.sso


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _secure(request: Request, sso: SsoService) -> bool:
    public = sso.config.public_url if sso.config else None
    return (public or str(request.base_url)).startswith("https://")


@router.get("/login", status_code=302, response_class=RedirectResponse)
def oidc_login(request: Request, services: ServicesDep) -> RedirectResponse:
    """Send the browser to the identity provider (authorization code with PKCE S256, state
    and nonce); 404 when SSO is not configured."""
    sso = _sso(services)
    start = sso.start(_base(request))
    response = RedirectResponse(start.url, status_code=302)
    response.set_cookie(
        FLOW_COOKIE,
        start.cookie,
        max_age=FLOW_SECONDS,
        path=FLOW_COOKIE_PATH,
        httponly=True,
        # Lax: the provider's redirect back is a top-level GET, which carries it.
        samesite="lax",
        secure=_secure(request, sso),
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/callback", status_code=302, response_class=RedirectResponse)
def oidc_callback(request: Request, services: ServicesDep) -> RedirectResponse:
    """Finish the sign-in: the user (made on its first sign-in) gets its mapped roles and a
    session cookie, and the browser goes to the console. 403 FORBIDDEN with no session for a
    domain not allowed, a bad or used state, or a token that does not check out."""
    sso = _sso(services)
    session = sso.finish(
        _base(request), dict(request.query_params), request.cookies.get(FLOW_COOKIE)
    )
    response = RedirectResponse(CONSOLE_PATH, status_code=302)
    secure = _secure(request, sso)
    response.delete_cookie(FLOW_COOKIE, path=FLOW_COOKIE_PATH, httponly=True, secure=secure)
    response.set_cookie(
        SESSION_COOKIE,
        session.token,
        max_age=session.max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    response.headers["Cache-Control"] = "no-store"
    return response
