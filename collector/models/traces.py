"""Trace, session and user shapes (docs/api-notes.md, "Traces, sessions and users")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from .envelopes import Pagination
from .requests import EvaluationOut, RequestListItem
from .rows import NoneIfEmpty, RowModel

ScoreMeans = dict[str, bool | int | float | str]
_SCORES = (
    "Per score name: the mean of the numeric and boolean scores (true = 1), or the newest "
    "value of a categorical one."
)


class TraceListItem(RowModel):
    """A trace in the list: its root record's name, and sums over all its records."""

    trace_id: str
    name: str = Field(description="Its root span's name (else its first record's).")
    started_at: datetime = Field(description="When its first record started.")
    duration_ms: int = Field(description="From its first record's start to its last one's end.")
    records: int = Field(description="Records of every kind.")
    llm_calls: int = Field(description="Records of kind llm or embedding.")
    errors: int
    total_tokens: int
    estimated_cost_usd: float
    user_id: Annotated[str | None, NoneIfEmpty] = Field(
        description="metadata.user_id of its root (else first) record."
    )
    session_id: Annotated[str | None, NoneIfEmpty] = Field(
        description="metadata.session_id, likewise."
    )
    scores: ScoreMeans = Field(
        default_factory=dict, description=f"Of the trace's and its records' scores. {_SCORES}"
    )


class TraceDetail(TraceListItem):
    """One trace, with a page of its records of every kind, oldest first."""

    items: list[RequestListItem]
    evaluations: list[EvaluationOut] = Field(
        default_factory=list,
        description="Each evaluation rule's decision on the trace, with its reason.",
    )


class TracePage(BaseModel):
    """``GET /v1/traces/{trace_id}``: the trace, and ``pagination`` over its items."""

    data: TraceDetail
    pagination: Pagination


class SessionListItem(RowModel):
    """A session: the records whose metadata.session_id it is (model calls unless asked)."""

    session_id: str
    user_ids: list[str]
    first_at: datetime
    last_at: datetime
    records: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float
    scores: ScoreMeans = Field(
        default_factory=dict,
        description=f"Of the scores on the session's records and their traces. {_SCORES}",
    )


class SessionDetail(SessionListItem):
    """One session, with a page of its records oldest first: the conversation in order."""

    items: list[RequestListItem]
    evaluations: list[EvaluationOut] = Field(
        default_factory=list,
        description="Each evaluation rule's decision on the session, with its reason.",
    )


class SessionPage(BaseModel):
    """``GET /v1/sessions/{session_id}``: the session, and ``pagination`` over its items."""

    data: SessionDetail
    pagination: Pagination


class UserListItem(RowModel):
    """A user: the records whose metadata.user_id it is (model calls unless asked)."""

    user_id: str
    first_at: datetime
    last_at: datetime
    records: int
    sessions: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float
