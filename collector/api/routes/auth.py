"""Sign-in with e-mail and password: ``/v1/auth/login``, ``/me`` and ``/logout``
(docs/api-notes.md, "Accounts"; docs/security.md, "Accounts").

The session lives server-side; the browser holds only its token, in an HttpOnly,
SameSite=Lax cookie (Secure when the request came over https).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from ...access.principal import SESSION_COOKIE, SignedIn
from ...errors import Forbidden, InvalidCredentials
from ...models.accounts import LoginIn, ProjectRole, SessionOut, SignedOut, UserOut
from ...models.envelopes import Data
from ...services.container import Services
from ...store.accounts import UserRow
from ..access import CSRF_HEADER, enforce, signed_in_user
from ..deps import ServicesDep

router = APIRouter(prefix="/auth", tags=["auth"])


def session_out(user: UserRow, signed_in: SignedIn) -> SessionOut:
    """The answer of login and me: the user, its projects (the default first), the CSRF token."""
    return SessionOut(
        user=UserOut.model_validate(user),
        projects=[ProjectRole(name=name, role=role) for name, role in signed_in.roles.items()],
        csrf_token=signed_in.csrf_token,
    )


def _resolve(request: Request, services: Services) -> SignedIn | None:
    token = request.cookies.get(SESSION_COOKIE)
    return services.accounts.sessions.resolve(token) if token else None


def _check_csrf(request: Request, signed_in: SignedIn) -> None:
    # Sign-out checks its own (its route is public in the access table): a page of another
    # site can make the browser send the cookie, never read the token.
    sent = request.headers.get(CSRF_HEADER, "")
    if not sent or not hmac.compare_digest(sent.encode(), signed_in.csrf_token.encode()):
        raise Forbidden(
            "A write by a signed-in session needs its X-CSRF-Token header", {"reason": "csrf"}
        )


async def current_user(request: Request) -> SignedIn:
    """The signed-in user of a route for users (the access check resolved its cookie and its
    CSRF token); 401 when the caller is no signed-in user."""
    await enforce(request)
    signed_in = signed_in_user(request)
    if signed_in is None:
        raise InvalidCredentials("Not signed in: sign in with POST /v1/auth/login")
    return signed_in


CurrentUser = Annotated[SignedIn, Depends(current_user)]


@router.post("/login", response_model=Data[SessionOut])
def login(
    body: LoginIn, request: Request, response: Response, services: ServicesDep
) -> Data[SessionOut]:
    """Sign in: set the session cookie and answer the user, its projects and the CSRF token.

    A wrong e-mail or password is one answer (401 INVALID_CREDENTIALS); after 10 failures for
    an address within a minute, 429 RATE_LIMITED until the minute has passed.
    """
    session = services.accounts.sessions.sign_in(body.email, body.password)
    response.set_cookie(
        SESSION_COOKIE,
        session.token,
        max_age=session.max_age,
        path="/",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return Data(data=session_out(session.user, session.signed_in))


@router.get("/me", response_model=Data[SessionOut])
def me(request: Request, services: ServicesDep) -> Data[SessionOut]:
    """Answer who the session cookie signs in, as login does (401 without a live session)."""
    signed_in = _resolve(request, services)
    user = services.accounts.users.by_id(signed_in.user_id) if signed_in else None
    if signed_in is None or user is None:
        raise InvalidCredentials("Not signed in: sign in with POST /v1/auth/login")
    return Data(data=session_out(user, signed_in))


@router.post("/logout", response_model=Data[SignedOut])
def logout(request: Request, response: Response, services: ServicesDep) -> Data[SignedOut]:
    """End the session server-side (it is refused from the next request on) and clear the
    cookie. A live session must send its CSRF token; without one, nothing to end."""
    token = request.cookies.get(SESSION_COOKIE)
    signed_in = _resolve(request, services)
    if token and signed_in is not None:
        _check_csrf(request, signed_in)
        services.accounts.sessions.sign_out(token)
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return Data(data=SignedOut(signed_out=signed_in is not None))
