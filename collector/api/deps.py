"""Dependencies: the services of the running app and the caller's project."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ..access.principal import Principal
from ..errors import InvalidApiKey
from ..services.container import Services
from .access import enforce, key_from_headers

__all__ = ["key_from_headers"]  # read by the error handlers and the feedback-token route


# The dependencies are ``async def`` because FastAPI runs a plain ``def`` dependency on its
# thread pool, a thread hop per dependency per request; they block only on a store query.
async def get_services(request: Request) -> Services:
    """Return the app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: <API key>")


async def current_principal(request: Request) -> Principal:
    """The caller of a route that acts in a project: a key or a signed-in user, checked.

    The check is ``api/access.py``'s, made once per request (the API router runs it first);
    here it is only read back.
    """
    principal = await enforce(request)
    if principal is None:
        # The table says the route checks its own credential, yet it asks for a caller.
        raise InvalidApiKey("This route takes no API key")
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


async def current_project(
    principal: CurrentPrincipal,
    # Read by key_from_headers; declared so that the OpenAPI schema shows both schemes.
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key)],
) -> str:
    """Return the project the request acts in: its key's, or the signed-in user's choice.

    Authenticated, allowed by the route's entry in the access table and counted against the
    project's request rate by :func:`~.access.enforce`.
    """
    return principal.project


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
