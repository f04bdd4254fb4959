"""Scores, score configs and feedback tokens (docs/api-notes.md, "Scores and feedback"); the
keyless feedback route."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from ...models.envelopes import Data, Page, Pagination
from ...models.requests import BatchResult, RejectedRecord
from ...models.scores import (
    FeedbackIn,
    FeedbackTokenIn,
    FeedbackTokenOut,
    ScoreBatchIn,
    ScoreConfigIn,
    ScoreConfigOut,
    ScoreIn,
    ScoreOut,
    ScoreSource,
)
from ..deps import Project, ServicesDep, key_from_headers

router = APIRouter(tags=["scores"])
feedback_router = APIRouter(tags=["feedback"])

Limit = Annotated[int, Query(ge=1, le=100)]
Cursor = Annotated[str | None, Query(max_length=2000)]
ScoreId = Annotated[str, Path(min_length=1, max_length=128)]


@router.post("/scores", status_code=201, response_model=Data[ScoreOut])
def create_score(body: ScoreIn, project: Project, services: ServicesDep) -> Data[ScoreOut]:
    """Store a score on a record, a trace or a session; the same id again replaces it."""
    return Data(data=ScoreOut.of(services.scores.create(project, body)))


@router.post("/scores/batch", status_code=201, response_model=Data[BatchResult])
def create_scores(body: ScoreBatchIn, project: Project, services: ServicesDep) -> Data[BatchResult]:
    """Store many scores; each bad one is reported by index and never drops the others."""
    accepted, rejected = services.scores.batch(project, body.scores)
    return Data(
        data=BatchResult(
            accepted=accepted, rejected=[RejectedRecord(index=i, error=e) for i, e in rejected]
        )
    )


@router.post("/scores/tokens", status_code=201, response_model=Data[FeedbackTokenOut])
def create_feedback_token(
    body: FeedbackTokenIn, request: Request, project: Project, services: ServicesDep
) -> Data[FeedbackTokenOut]:
    """Mint a token an end user's browser posts one vote with, without a key."""
    raw = key_from_headers(request.headers) or ""  # present: Project checked it
    token, expires_at = services.scores.mint(project, raw, body)
    return Data(
        data=FeedbackTokenOut(token=token, url=f"/v1/feedback/{token}", expires_at=expires_at)
    )


@router.get("/scores", response_model=Page[ScoreOut])
def list_scores(
    project: Project,
    services: ServicesDep,
    request_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    trace_id: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    session_id: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
    name: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    source: ScoreSource | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[ScoreOut]:
    """List scores, newest first."""
    rows, next_cursor = services.scores.page(
        project,
        {
            "request_id": request_id,
            "trace_id": trace_id,
            "session_id": session_id,
            "name": name,
            "source": source,
        },
        limit,
        cursor,
    )
    return Page(data=[ScoreOut.of(r) for r in rows], pagination=Pagination.of(next_cursor))


@router.get("/scores/{score_id}", response_model=Data[ScoreOut])
def get_score(score_id: ScoreId, project: Project, services: ServicesDep) -> Data[ScoreOut]:
    """Return one score."""
    return Data(data=ScoreOut.of(services.scores.get(project, score_id)))


@router.delete("/scores/{score_id}", response_model=Data[ScoreOut])
def delete_score(score_id: ScoreId, project: Project, services: ServicesDep) -> Data[ScoreOut]:
    """Delete one score; answers what it was."""
    return Data(data=ScoreOut.of(services.scores.delete(project, score_id)))


@router.put("/score-configs/{name}", response_model=Data[ScoreConfigOut])
def put_score_config(
    name: Annotated[str, Path(min_length=1, max_length=100)],
    body: ScoreConfigIn,
    project: Project,
    services: ServicesDep,
) -> Data[ScoreConfigOut]:
    """Set what scores of ``name`` must be (type, range, categories)."""
    return Data(data=ScoreConfigOut.of(services.scores.put_config(project, name, body)))


@router.get("/score-configs", response_model=Data[list[ScoreConfigOut]])
def list_score_configs(project: Project, services: ServicesDep) -> Data[list[ScoreConfigOut]]:
    """Return the project's score configs by name."""
    return Data(data=[ScoreConfigOut.of(c) for c in services.scores.configs(project)])


@feedback_router.post("/feedback/{token}", status_code=201, response_model=Data[ScoreOut])
def post_feedback(
    token: Annotated[str, Path(min_length=1, max_length=8192)],
    body: FeedbackIn,
    services: ServicesDep,
) -> Data[ScoreOut]:
    """An end user's vote, with no key: the token is the credential (CORS: any origin)."""
    return Data(data=ScoreOut.of(services.scores.feedback(token, body)))
