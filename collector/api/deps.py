"""Dependencies: the services of the running app and the caller's project."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..errors import InvalidApiKey
from ..services.container import Services


# The dependencies are ``async def`` because FastAPI runs a plain ``def`` dependency on its
# thread pool, a thread hop per dependency per request; they block only on a store query.
async def get_services(request: Request) -> Services:
    """Return the app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


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


async def current_project(
    request: Request,
    services: ServicesDep,
    # Read by key_from_headers; declared so that the OpenAPI schema shows both schemes.
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """Authenticate the request by either header; return the project of its key.

    The project's request rate is counted here, once its key is known: a request without a
    valid key is refused (401) before it can count against any project.
    """
    raw = key_from_headers(request.headers)
    project = services.keys.known_project(raw)
    if project is None:
        project = await run_in_threadpool(services.keys.authenticate, raw)
    services.rate_limits.admit_request(project)
    return project


Project = Annotated[str, Depends(current_project)]


async def ingest_project(project: Project, services: ServicesDep) -> str:
    """The caller's project, refused (429) while it has used up an ingest volume window.

    The ingest route counts what it took with ``services.rate_limits.charge_ingest``.
    """
    services.rate_limits.admit_ingest(project)
    return project


IngestProject = Annotated[str, Depends(ingest_project)]


async def require_admin(
    request: Request, x_promptrail_admin: Annotated[str | None, Header()] = None
) -> None:
    """Refuse the request unless it carries this collector's admin token.

    The token lives only in the collector's runtime file inside the data dir (mode 0600); a
    collector started without one (not by ``promptrail serve``) refuses every admin route.
    """
    token: str | None = getattr(request.app.state, "admin_token", None)
    if not token or not x_promptrail_admin or not hmac.compare_digest(token, x_promptrail_admin):
        raise InvalidApiKey("Admin token required")
