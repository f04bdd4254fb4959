"""Sessions (docs/api-notes.md, "Traces, sessions and users"): the records sharing a
metadata.session_id, as conversations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from ...models.envelopes import Page, Pagination
from ...models.requests import EvaluationOut, RequestListItem
from ...models.traces import SessionDetail, SessionListItem, SessionPage
from ..deps import Project, ServicesDep
from .requests import Cursor, Environment, Kind, Limit

router = APIRouter(prefix="/sessions", tags=["sessions"])

Date = Annotated[
    str | None,
    Query(max_length=40, description="Bounds the records' created_at (default: the last 30 days)."),
]


@router.get("", response_model=Page[SessionListItem])
def list_sessions(
    project: Project,
    services: ServicesDep,
    limit: Limit = 20,
    cursor: Cursor = None,
    user_id: Annotated[str | None, Query(max_length=1000)] = None,
    start_date: Date = None,
    end_date: Date = None,
    kind: Kind = None,
    environment: Environment = None,
) -> Page[SessionListItem]:
    """List the period's sessions, latest activity first (sums over their model calls)."""
    page = services.traces.session_page(
        project,
        limit,
        cursor,
        user_id=user_id,
        start_date=start_date,
        end_date=end_date,
        kind=kind,
        environment=environment,
    )
    return Page(
        data=[SessionListItem.of(s, scores=scores) for s, scores in page.items],
        pagination=Pagination.of(page.next_cursor),
    )


@router.get("/{session_id}", response_model=SessionPage)
def get_session(
    session_id: Annotated[str, Path(max_length=1000)],
    project: Project,
    services: ServicesDep,
    limit: Limit = 100,
    cursor: Cursor = None,
    kind: Kind = None,
) -> SessionPage:
    """One session with its records oldest first (its model calls unless ``kind``) and each
    evaluation rule's decision on it."""
    found = services.traces.session(project, session_id, limit, cursor, kind)
    return SessionPage(
        data=SessionDetail.of(
            found.summary,
            scores=found.scores,
            items=[RequestListItem.of_record(r, found.row_scores.get(r.id)) for r in found.rows],
            evaluations=[
                EvaluationOut.model_validate(e, from_attributes=True)
                for e in services.evaluation.decisions.on_target(project, "session", session_id)
            ],
        ),
        pagination=Pagination.of(found.next_cursor),
    )
