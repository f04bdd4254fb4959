"""Prompts (spec 4.1): create, get, list, update, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ...models.envelopes import Data, ErrorBody, Page
from ...models.prompts import (
    PromptCreate,
    PromptDeleted,
    PromptGetOut,
    PromptListItem,
    PromptOut,
    PromptUpdate,
    PromptUpdateOut,
)
from ...services.mappers import (
    pagination,
    prompt_get_out,
    prompt_list_item,
    prompt_out,
    prompt_update_out,
)
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts", tags=["prompts"])


@router.post(
    "",
    status_code=201,
    response_model=Data[PromptOut],
    responses={409: {"model": ErrorBody, "description": "PROMPT_ALREADY_EXISTS"}},
)
def create_prompt(body: PromptCreate, project: Project, services: ServicesDep) -> Data[PromptOut]:
    """Create a prompt at version 1."""
    return Data(data=prompt_out(services.prompts.create(project, body)))


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
        data=[prompt_list_item(h) for h in page.items],
        pagination=pagination(page.next_cursor, total=page.total),
    )


@router.get("/{name}", response_model=Data[PromptGetOut])
def get_prompt(name: str, project: Project, services: ServicesDep) -> Data[PromptGetOut]:
    """Return a prompt's newest version."""
    return Data(data=prompt_get_out(services.prompts.get(project, name)))


@router.patch("/{name}", response_model=Data[PromptUpdateOut])
def update_prompt(
    name: str, body: PromptUpdate, project: Project, services: ServicesDep
) -> Data[PromptUpdateOut]:
    """Make a new version with the given fields changed."""
    return Data(data=prompt_update_out(services.prompts.update(project, name, body)))


@router.delete("/{name}", response_model=Data[PromptDeleted])
def delete_prompt(name: str, project: Project, services: ServicesDep) -> Data[PromptDeleted]:
    """Soft-delete a prompt: it vanishes from get, list, template and run."""
    return Data(data=PromptDeleted(deleted=True, id=services.prompts.delete(project, name)))
