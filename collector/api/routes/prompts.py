"""Prompts (spec 4.1): create, get, list, update, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool

from ...models.envelopes import Data, ErrorBody, Page, Pagination
from ...models.prompts import (
    DiffOut,
    PromptCreate,
    PromptDeleted,
    PromptGetOut,
    PromptListItem,
    PromptOut,
    PromptUpdate,
    PromptUpdateOut,
)
from ...services.container import Services
from ...services.prompts.encoded import Shape
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts", tags=["prompts"])


async def read_version(
    services: Services,
    project: str,
    ref: str,
    shape: Shape,
    number: int | None = None,
    label: str | None = None,
) -> Response:
    """Answer a read route with the version's body, encoded once per version.

    ``async`` because a version the index or cache holds needs no query: such a read runs on
    the event loop with no hop to a worker thread; only a miss reads the store on one. The
    route keeps its ``response_model`` so the OpenAPI schema documents the same body.
    """
    prompts = services.prompts
    row = prompts.cached_version(project, ref, number, label)
    if row is None:
        row = await run_in_threadpool(prompts.resolve_version, project, ref, number, label)
    return Response(prompts.encoded.body(row, shape), media_type="application/json")


@router.post(
    "",
    status_code=201,
    response_model=Data[PromptOut],
    responses={409: {"model": ErrorBody, "description": "PROMPT_ALREADY_EXISTS"}},
)
def create_prompt(body: PromptCreate, project: Project, services: ServicesDep) -> Data[PromptOut]:
    """Create a prompt at version 1."""
    return Data(data=PromptOut.of_version(services.prompts.create(project, body)))


@router.get("", response_model=Page[PromptListItem])
def list_prompts(
    project: Project,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
    tags: Annotated[
        list[str] | None, Query(description="Repeat or comma-separate; all must match")
    ] = None,
    folder: Annotated[str | None, Query(max_length=256)] = None,
    search: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[PromptListItem]:
    """List live prompts, newest first."""
    page = services.prompts.list_page(
        project, limit, cursor, tags=tags, folder=folder, search=search
    )
    return Page(
        data=[PromptListItem.of_head(h) for h in page.items],
        pagination=Pagination.of(page.next_cursor, total=page.total),
    )


@router.get("/{name}", response_model=Data[PromptGetOut])
async def get_prompt(name: str, project: Project, services: ServicesDep) -> Response:
    """Return a prompt's newest version."""
    return await read_version(services, project, name, "get")


# A version number or a label (``latest`` the newest), as the diff's ``from`` and ``to``.
VersionOrLabel = Annotated[str, Query(min_length=1, max_length=100)]


@router.get("/{name}/diff", response_model=Data[DiffOut])
def diff_versions(
    name: str,
    project: Project,
    services: ServicesDep,
    from_: Annotated[str, Query(alias="from", min_length=1, max_length=100)],
    to: VersionOrLabel,
) -> Data[DiffOut]:
    """Return what changed from one version to another: per message, tool and parameter."""
    return Data(data=DiffOut.of_diff(services.prompts.diff(project, name, from_, to)))


@router.patch("/{name}", response_model=Data[PromptUpdateOut])
def update_prompt(
    name: str, body: PromptUpdate, project: Project, services: ServicesDep
) -> Data[PromptUpdateOut]:
    """Make a new version with the given fields changed."""
    return Data(data=PromptUpdateOut.of_version(services.prompts.update(project, name, body)))


@router.delete("/{name}", response_model=Data[PromptDeleted])
def delete_prompt(name: str, project: Project, services: ServicesDep) -> Data[PromptDeleted]:
    """Soft-delete a prompt: it vanishes from get, list, template and run."""
    return Data(data=PromptDeleted(deleted=True, id=services.prompts.delete(project, name)))
