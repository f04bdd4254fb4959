"""Datasets and their items (docs/api-notes.md, "Datasets and experiments")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ...models.datasets import (
    AcceptedOut,
    DatasetIn,
    DatasetOut,
    FromRequestsIn,
    ItemOut,
    ItemsIn,
)
from ...models.envelopes import Data, Page, Pagination
from ...models.requests import BatchResult, RejectedRecord
from ..deps import Project, ServicesDep

router = APIRouter(prefix="/datasets", tags=["datasets"])

Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]
DatasetRef = Annotated[str, Path(min_length=1, max_length=200, description="Name or id.")]
ItemRef = Annotated[str, Path(min_length=1, max_length=200)]


@router.post("", status_code=201, response_model=Data[DatasetOut])
def create_dataset(body: DatasetIn, project: Project, services: ServicesDep) -> Data[DatasetOut]:
    """Create a dataset (names are unique per project: 409 DATASET_ALREADY_EXISTS)."""
    return Data(data=DatasetOut.of(services.datasets.create(project, body)))


@router.get("", response_model=Page[DatasetOut])
def list_datasets(
    project: Project, services: ServicesDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[DatasetOut]:
    """List datasets, newest first."""
    rows, next_cursor = services.datasets.page(project, limit, cursor)
    return Page(data=[DatasetOut.of(r) for r in rows], pagination=Pagination.of(next_cursor))


@router.get("/{name}", response_model=Data[DatasetOut])
def get_dataset(name: DatasetRef, project: Project, services: ServicesDep) -> Data[DatasetOut]:
    """Return one dataset, by name or id."""
    return Data(data=DatasetOut.of(services.datasets.get(project, name)))


@router.delete("/{name}", response_model=Data[DatasetOut])
def delete_dataset(name: DatasetRef, project: Project, services: ServicesDep) -> Data[DatasetOut]:
    """Delete a dataset; answers what it was."""
    return Data(data=DatasetOut.of(services.datasets.delete(project, name)))


@router.post("/{name}/items", status_code=201, response_model=Data[BatchResult])
def add_items(
    name: DatasetRef, body: ItemsIn, project: Project, services: ServicesDep
) -> Data[BatchResult]:
    """Add items (an id posted again replaces its item, in place); bad ones by index."""
    accepted, rejected = services.datasets.add_items(project, name, body.items)
    return Data(
        data=BatchResult(
            accepted=accepted, rejected=[RejectedRecord(index=i, error=e) for i, e in rejected]
        )
    )


@router.post("/{name}/items/from-requests", status_code=201, response_model=Data[AcceptedOut])
def add_items_from_requests(
    name: DatasetRef, body: FromRequestsIn, project: Project, services: ServicesDep
) -> Data[AcceptedOut]:
    """Add the records the request list's filters select as items (newest first)."""
    return Data(data=AcceptedOut(accepted=services.datasets.add_from_requests(project, name, body)))


@router.get("/{name}/items", response_model=Page[ItemOut])
def list_items(
    name: DatasetRef,
    project: Project,
    services: ServicesDep,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[ItemOut]:
    """List a dataset's items in the order added."""
    rows, next_cursor = services.datasets.items_page(project, name, limit, cursor)
    return Page(data=[ItemOut.of(r) for r in rows], pagination=Pagination.of(next_cursor))


@router.delete("/{name}/items/{item_id}", response_model=Data[ItemOut])
def delete_item(
    name: DatasetRef, item_id: ItemRef, project: Project, services: ServicesDep
) -> Data[ItemOut]:
    """Delete one item; answers what it was."""
    return Data(data=ItemOut.of(services.datasets.delete_item(project, name, item_id)))
