"""The score rows: a score, a mean's view of one, a score config and the list's query.

Apart from the queries because the score store (:mod:`.scores`), the SQL other stores borrow
(:mod:`.score_sql`) and the services all build or read them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class ScoreRow:
    """One score as stored (``value`` decoded from its JSON text)."""

    project: str
    id: str
    request_id: str | None
    trace_id: str | None
    name: str
    data_type: str
    value: Any
    comment: str | None
    correction: str | None
    source: str
    metadata: dict[str, Any]
    created_at: datetime
    session_id: str | None = None  # a session's score: no request_id or trace_id

    @property
    def value_number(self) -> float | None:
        """The value as a mean counts it: a number, true = 1, false = 0; None for text."""
        return number_of(self.value)

    @property
    def value_text(self) -> str:
        """The value as ``score.<name>=<value>`` matches it."""
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return self.value if isinstance(self.value, str) else json.dumps(self.value)


def number_of(value: Any) -> float | None:
    """A score value as a mean counts it: a number, true = 1, false = 0; None for text."""
    if isinstance(value, bool | int | float):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class ScoreValue:
    """A live score as a mean reads it (:meth:`ScoreStore.values_on_targets`): which score,
    on what, its name, type and value, and when; not its comment, correction, source or
    metadata, which no list shows."""

    id: str
    request_id: str | None
    trace_id: str | None
    name: str
    data_type: str
    value: Any
    created_at: datetime
    session_id: str | None = None

    @property
    def value_number(self) -> float | None:
        """The value as a mean counts it (:func:`number_of`)."""
        return number_of(self.value)


@dataclass(frozen=True)
class ScoreConfigRow:
    """One score config as stored."""

    name: str
    data_type: str
    min: float | None
    max: float | None
    categories: list[str] | None
    description: str | None
    updated_at: datetime


@dataclass(frozen=True)
class ScoreQuery:
    """Filters of ``GET /v1/scores`` and the position after which a page starts."""

    request_id: str | None = None
    trace_id: str | None = None
    name: str | None = None
    source: str | None = None
    session_id: str | None = None
    after: tuple[datetime, str] | None = None


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def score_row(project: str, row: Sequence[Any]) -> ScoreRow:
    (
        score_id,
        request_id,
        trace_id,
        name,
        data_type,
        value,
        comment,
        correction,
        source,
        metadata,
        created_at,
        session_id,
    ) = row
    return ScoreRow(
        project=project,
        id=str(score_id),
        request_id=str(request_id) or None,
        trace_id=str(trace_id) or None,
        name=str(name),
        data_type=str(data_type),
        value=json.loads(value),
        comment=comment,
        correction=correction,
        source=str(source),
        metadata=json.loads(metadata),
        created_at=as_utc(created_at),
        session_id=str(session_id) or None,
    )
