"""The one access check every API request passes: who calls, in which project, and may it.

Each route's need comes from the table in ``access/permissions.py``; this module resolves the
caller (a key's headers, else a session cookie) into a :class:`~..access.principal.Principal`
and refuses what the table does not allow (docs/security.md, "Roles and scopes"):

- no key and no live session: 401 ``INVALID_API_KEY`` (a dead session: ``INVALID_CREDENTIALS``);
- a key without the route's scope: 403 ``INSUFFICIENT_SCOPE``, ``details.required``;
- a user whose role does not allow it: 403 ``FORBIDDEN``, ``details.required_role``;
- a write by cookie without the session's ``X-CSRF-Token``: 403 ``FORBIDDEN``,
  ``details.reason = "csrf"``;
- a project the user (or the key) does not belong to: 404 ``PROJECT_NOT_FOUND``.

It runs as a dependency of the whole API router (``app.py``) and again, answered from the
request's scope, wherever a route asks for its ``Project``; the principal is resolved once.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from ..access.caller import set_caller
from ..access.permissions import Permission, api_permission
from ..access.principal import SESSION_COOKIE, Principal, SignedIn
from ..errors import Forbidden, InsufficientScope, InvalidApiKey, ProjectNotFound
from ..services.container import Services

# Where a request keeps its resolved caller (the ASGI scope lives exactly as long as it).
_PRINCIPAL = "promptrail.principal"
_SIGNED_IN = "promptrail.signed_in"
PROJECT_HEADER = "x-promptrail-project"
CSRF_HEADER = "x-csrf-token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """Return the API key of a request: ``Authorization: Bearer`` first, then ``X-API-Key``.

    Raise INVALID_API_KEY saying to add ``Bearer `` when the only key sent is an
    ``Authorization`` header without that scheme (``Authorization: pr-...``): the key was
    there, so "missing" would mislead.
    """
    authorization = headers.get("authorization", "").strip()
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    api_key = headers.get("x-api-key") or None
    if api_key is None and authorization and scheme.lower() != "bearer":
        raise InvalidApiKey(
            "The Authorization header needs the Bearer scheme: send "
            "'Authorization: Bearer <key>' (add 'Bearer ' before the key), or 'X-API-Key: <key>'"
        )
    return api_key


def route_permission(request: Request) -> Permission | None:
    """What the request's route needs (the table's entry), or None for a route not in it."""
    route: Any = request.scope.get("route")
    path = getattr(route, "path", None)
    return api_permission(request.method, path) if isinstance(path, str) else None


async def enforce(request: Request) -> Principal | None:
    """Check the request against its route's entry; return its caller, None on a route that
    checks its own credential (public, the admin token, a feedback token).

    Idempotent: the first call resolves and checks, later ones return what it found.
    """
    known: Principal | None = request.scope.get(_PRINCIPAL)
    if known is not None:
        return known
    permission = route_permission(request)
    if permission is None:
        # Fail closed: a route the table does not name is served to no one (the route walk
        # in the tests keeps this from happening).
        raise Forbidden(
            "No access rule covers this route",
            {"reason": "unlisted_route", "path": request.url.path},
        )
    if permission.access in ("public", "admin_token", "feedback_token"):
        return None
    services: Services = request.app.state.services
    raw = key_from_headers(request.headers)
    signed_in = None if raw is not None else _signed_in(request, services)
    if signed_in is None:
        principal = await _key_principal(request, services, raw, permission)
    else:
        principal = _user_principal(request, signed_in, permission)
    if permission.access == "project":
        # Counted once the caller is known: a request without a valid credential is refused
        # (401) before it can count against any project.
        services.rate_limits.admit_request(principal.project)
    _check(request, permission, principal, signed_in)
    request.scope[_PRINCIPAL] = principal
    set_caller(principal)  # for the checks services make (protected labels)
    return principal


def signed_in_user(request: Request) -> SignedIn | None:
    """The signed-in user of a request :func:`enforce` resolved by its cookie, else None."""
    user: SignedIn | None = request.scope.get(_SIGNED_IN)
    return user


async def _key_principal(
    request: Request, services: Services, raw: str | None, permission: Permission
) -> Principal:
    grant = services.keys.known_grant(raw)
    if grant is None:
        grant = await run_in_threadpool(services.keys.authenticate_grant, raw)
    project = request.path_params.get("project")
    if project is not None and project != grant.project:
        # A key never sees another project, not even whether it exists.
        raise ProjectNotFound(str(project))
    return Principal(
        project=grant.project, scopes=grant.scopes, role=None, user_id=None, key_id=grant.key_id
    )


def _signed_in(request: Request, services: Services) -> SignedIn | None:
    """The user of the request's session cookie; None without a cookie (or without accounts)."""
    token = request.cookies.get(SESSION_COOKIE)
    if not token or services.sessions is None:
        return None
    user = services.sessions.resolve(token)
    if user is None:
        raise InvalidApiKey(
            "The session has ended: sign in again, or send an API key",
            {"reason": "session"},
        )
    request.scope[_SIGNED_IN] = user
    return user


def _user_principal(request: Request, user: SignedIn, permission: Permission) -> Principal:
    project = request.path_params.get("project") or request.headers.get(PROJECT_HEADER)
    if project is None:
        # The user's first project is the default; instance routes need none.
        project = next(iter(user.roles), "")
        if not project and permission.access == "project":
            raise Forbidden("You are not a member of any project", {"reason": "no_project"})
    role = user.roles.get(project) if project else None
    if role is None and permission.access == "project":
        raise ProjectNotFound(str(project))
    return Principal(project=project, scopes=None, role=role, user_id=user.user_id, key_id=None)


def _check(
    request: Request, permission: Permission, principal: Principal, user: SignedIn | None
) -> None:
    if principal.scopes is not None:  # a key
        if permission.access != "project":
            raise Forbidden(
                "This route is for signed-in users, not API keys", {"reason": "user_only"}
            )
        if not permission.key_allowed(principal.scopes):
            raise InsufficientScope(permission.scope or "admin")
        return
    assert user is not None
    _check_csrf(request, user)
    if permission.access == "instance_admin" and not user.instance_admin:
        raise Forbidden("Only an instance admin may do this", {"required_role": "instance_admin"})
    if permission.access == "project" and (
        principal.role is None or not permission.role_allowed(principal.role)
    ):
        if permission.role is None:
            raise Forbidden("This route is for API keys only", {"reason": "key_only"})
        raise Forbidden(
            f"Your role in project '{principal.project}' does not allow this",
            {"required_role": permission.required_role, "role": principal.role},
        )


def _check_csrf(request: Request, user: SignedIn) -> None:
    """A write by cookie repeats the session's CSRF token: a page of another site can make the
    browser send the cookie, never read the token."""
    if request.method in _SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not sent or not hmac.compare_digest(sent.encode(), user.csrf_token.encode()):
        raise Forbidden(
            "A write by a signed-in session needs its X-CSRF-Token header", {"reason": "csrf"}
        )


async def check_access(request: Request) -> None:
    """The API router's dependency: every route's check, before anything of the route runs."""
    await enforce(request)
