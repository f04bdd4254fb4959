"""Prompts (spec 4.1): create, get, list, update, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from ...models.envelopes import ErrorBody, Pagination
from ...models.prompts import (
    PromptCreate,
    PromptDeleted,
    PromptGetOut,
    PromptListItem,
    PromptOut,
    PromptUpdate,
    PromptUpdateOut,
)
from ...services.prompts import public_id
from ...store.prompts import ListFilter
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/prompts", tags=["prompts"])


class PromptData(BaseModel):
    """``data`` = the created prompt."""

    data: PromptOut


class PromptGetData(BaseModel):
    """``data`` = the prompt subset."""

    data: PromptGetOut


class PromptUpdateData(BaseModel):
    """``data`` = the updated prompt."""

    data: PromptUpdateOut


class PromptDeletedData(BaseModel):
    """``data`` = deletion result."""

    data: PromptDeleted


class PromptPageOut(BaseModel):
    """A page of prompts."""

    data: list[PromptListItem]
    pagination: Pagination


@router.post(
    "",
    status_code=201,
    response_model=PromptData,
    responses={409: {"model": ErrorBody, "description": "PROMPT_ALREADY_EXISTS"}},
)
def create_prompt(body: PromptCreate, project: Project, services: ServicesDep) -> PromptData:
    """Create a prompt at version 1."""
    row = services.prompts.create(project, body)
    return PromptData(
        data=PromptOut(
            id=public_id(row.prompt_id),
            name=row.name,
            description=row.description,
            template=row.template,
            model=row.model,
            parameters=row.parameters,
            version=row.version,
            tags=row.tags,
            folder=row.folder or None,
            created_at=row.prompt_created_at,
            updated_at=row.created_at,
        )
    )


@router.get("", response_model=PromptPageOut)
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
) -> PromptPageOut:
    """List live prompts, newest first."""
    wanted = [t.strip() for value in tags or [] for t in value.split(",") if t.strip()]
    folder_path = "/" + "/".join(p for p in folder.split("/") if p) if folder else None
    page = services.prompts.list_page(
        project, ListFilter(tags=wanted, folder=folder_path, search=search or None), limit, cursor
    )
    return PromptPageOut(
        data=[
            PromptListItem(
                id=public_id(h.prompt_id),
                name=h.name,
                description=h.description,
                version=h.version,
                created_at=h.prompt_created_at,
                tags=h.tags,
                folder=h.folder or None,
            )
            for h in page.items
        ],
        pagination=Pagination(
            has_more=page.next_cursor is not None, next_cursor=page.next_cursor, total=page.total
        ),
    )


@router.get("/{name}", response_model=PromptGetData)
def get_prompt(name: str, project: Project, services: ServicesDep) -> PromptGetData:
    """Return a prompt's newest version."""
    row = services.prompts.get(project, name)
    return PromptGetData(
        data=PromptGetOut(
            id=public_id(row.prompt_id),
            name=row.name,
            template=row.template,
            model=row.model,
            version=row.version,
            created_at=row.prompt_created_at,
            description=row.description,
            tags=row.tags,
            folder=row.folder or None,
        )
    )


@router.patch("/{name}", response_model=PromptUpdateData)
def update_prompt(
    name: str, body: PromptUpdate, project: Project, services: ServicesDep
) -> PromptUpdateData:
    """Make a new version with the given fields changed."""
    row = services.prompts.update(project, name, body)
    return PromptUpdateData(
        data=PromptUpdateOut(
            id=public_id(row.prompt_id),
            name=row.name,
            template=row.template,
            model=row.model,
            version=row.version,
            updated_at=row.created_at,
        )
    )


@router.delete("/{name}", response_model=PromptDeletedData)
def delete_prompt(name: str, project: Project, services: ServicesDep) -> PromptDeletedData:
    """Soft-delete a prompt: it vanishes from get, list, template and run."""
    return PromptDeletedData(
        data=PromptDeleted(deleted=True, id=services.prompts.delete(project, name))
    )
