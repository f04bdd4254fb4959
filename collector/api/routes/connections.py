"""Provider connections (docs/api-notes.md, "Connections"): a project's own credentials."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from ...models.connections import CheckOut, ConnectionIn, ConnectionOut, ConnectionPatch
from ...models.envelopes import Data
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/connections", tags=["connections"])

ConnectionRef = Annotated[str, Path(min_length=1, max_length=64)]


@router.post("", status_code=201, response_model=Data[ConnectionOut])
def create_connection(
    body: ConnectionIn, project: Project, services: ServicesDep
) -> Data[ConnectionOut]:
    """Store a connection; its key and header values are never shown again."""
    return Data(data=services.connections.create(project, body))


@router.get("", response_model=Data[list[ConnectionOut]])
def list_connections(project: Project, services: ServicesDep) -> Data[list[ConnectionOut]]:
    """List the project's connections, oldest first."""
    return Data(data=services.connections.list_all(project))


@router.get("/{name}", response_model=Data[ConnectionOut])
def get_connection(
    name: ConnectionRef, project: Project, services: ServicesDep
) -> Data[ConnectionOut]:
    """Return one connection."""
    return Data(data=services.connections.get(project, name))


@router.patch("/{name}", response_model=Data[ConnectionOut])
def update_connection(
    name: ConnectionRef, body: ConnectionPatch, project: Project, services: ServicesDep
) -> Data[ConnectionOut]:
    """Change the fields given (``null`` clears an optional one)."""
    return Data(data=services.connections.update(project, name, body))


@router.delete("/{name}", response_model=Data[ConnectionOut])
def delete_connection(
    name: ConnectionRef, project: Project, services: ServicesDep
) -> Data[ConnectionOut]:
    """Delete a connection; answers what it was."""
    return Data(data=services.connections.delete(project, name))


@router.post("/{name}/check", response_model=Data[CheckOut])
async def check_connection(
    name: ConnectionRef, project: Project, services: ServicesDep
) -> Data[CheckOut]:
    """Make one minimal call through the connection: ok, auth_invalid, unreachable,
    quota_exceeded or error, and how long it took."""
    result = await services.connections.check(project, name)
    return Data(data=CheckOut(**vars(result)))
