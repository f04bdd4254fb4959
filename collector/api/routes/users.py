"""Users (docs/api-notes.md, "Traces, sessions and users"): the records sharing a metadata.user_id,
summed."""

from __future__ import annotations

from fastapi import APIRouter

from ...models.envelopes import Page, Pagination
from ...models.traces import UserListItem
from ..deps import Project, ServicesDep
from .requests import Cursor, Environment, Kind, Limit
from .sessions import Date

router = APIRouter(prefix="/users", tags=["users"])


@router.get("", response_model=Page[UserListItem])
def list_users(
    project: Project,
    services: ServicesDep,
    limit: Limit = 20,
    cursor: Cursor = None,
    start_date: Date = None,
    end_date: Date = None,
    kind: Kind = None,
    environment: Environment = None,
) -> Page[UserListItem]:
    """List the period's users, latest activity first (sums over their model calls)."""
    page = services.traces.user_page(
        project,
        limit,
        cursor,
        start_date=start_date,
        end_date=end_date,
        kind=kind,
        environment=environment,
    )
    return Page(
        data=[UserListItem.of(u) for u in page.items],
        pagination=Pagination.of(page.next_cursor),
    )
