"""Reading and deleting the request log: detail, list, search, delete by metadata."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..errors import RequestNotFound, ValidationFailed
from ..models.requests import ENVIRONMENT_PATTERN, MODEL_CALL_KINDS, RECORD_KINDS
from ..store.request_filters import RequestFilter
from ..store.request_rows import RequestRow, metadata_text
from ..store.requests import RequestStore
from ..store.score_rows import ScoreRow
from ..store.score_sql import ScoreTest
from ..store.writes import PendingWrites
from .cursors import CursorCodec, Position, time_key
from .dates import parse_date, utc_now_ms
from .highlights import TextRun, matched_fields
from .ingest import time_of_id

_Found = TypeVar("_Found")


@dataclass(frozen=True)
class RecordPage:
    """A page of records and the cursor of the next one."""

    rows: list[RequestRow]
    next_cursor: str | None


@dataclass(frozen=True)
class Hit:
    """A search hit: the record and the snippet of each matched field, as text runs."""

    row: RequestRow
    runs: dict[str, list[TextRun]]


@dataclass(frozen=True)
class HitPage:
    """A page of search hits."""

    hits: list[Hit]
    next_cursor: str | None


class RequestService:
    """Detail, list, search and delete over the request log of one project at a time."""

    def __init__(
        self, store: RequestStore, cursor_secret: str, pending: PendingWrites | None = None
    ) -> None:
        self._store = store
        self._pending = pending
        self._list_cursors = CursorCodec(cursor_secret, "requests")
        self._search_cursors = CursorCodec(cursor_secret, "search")

    def get(self, project: str, request_id: str) -> RequestRow:
        """Return one record, or 404 REQUEST_NOT_FOUND."""
        return self._found(project, request_id, lambda at: self._store.get(project, request_id, at))

    def detail(self, project: str, request_id: str) -> tuple[RequestRow, list[ScoreRow]]:
        """Return one record and its scores (its own and its trace's, newest first; its own
        read at the same time as the record); or 404 REQUEST_NOT_FOUND."""
        return self._found(
            project, request_id, lambda at: self._store.get_with_scores(project, request_id, at)
        )

    def _found(
        self, project: str, request_id: str, read: Callable[[datetime | None], _Found | None]
    ) -> _Found:
        """What ``read`` finds at the time the id tells, else by id alone; or a 404."""
        self._settle(project)
        hinted = time_of_id(request_id)
        found = read(hinted) if hinted else None
        if found is None:
            # Client-chosen ids (or a client-chosen time) carry no usable time: look by id.
            found = read(None)
        if found is None:
            raise RequestNotFound(f"Request '{request_id}' not found", {"request_id": request_id})
        return found

    def list_page(
        self,
        project: str,
        limit: int,
        cursor: str | None,
        *,
        prompt_name: str | None = None,
        status: str | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        metadata: dict[str, str] | None = None,
        trace_id: str | None = None,
        score_params: Sequence[tuple[str, str]] = (),
        kind: str | None = None,
        environment: str | None = None,
    ) -> RecordPage:
        """Return records newest first, keyset-paginated on (created_at, id).

        The dates are ISO 8601 or ``YYYY-MM-DD`` (a date-only end includes its whole day);
        ``metadata`` pairs are ANDed. ``kind`` is as :func:`kinds_of` reads it; without it
        a trace's list has every kind, any other list the model calls. ``environment`` is as
        :func:`environments_of` reads it (a trace's list: every environment).
        """
        filters = request_filter(
            prompt_name=prompt_name,
            status=status,
            start_date=start_date,
            end_date=end_date,
            metadata=metadata,
            trace_id=trace_id,
            scores=score_tests(score_params),
            scores_table=self._store.scores_table,
            kinds=kinds_of(kind, every=trace_id is not None),
            environments=environments_of(environment, every=trace_id is not None),
        )
        if filters.start and filters.end and filters.start > filters.end:
            raise ValidationFailed("start_date", "start_date must not be after end_date")
        after = self._list_cursors.after_time(cursor)
        self._settle(project)
        rows = self._store.page(project, filters, after, limit + 1)
        return RecordPage(*self._list_cursors.next_page(rows, limit, _position))

    def search(
        self,
        project: str,
        query: str,
        limit: int,
        cursor: str | None,
        kind: str | None = None,
        environment: str | None = None,
    ) -> HitPage:
        """Return records whose input variables, output, metadata or input contain query.

        Model calls only, unless ``kind`` (as :func:`kinds_of` reads it) asks for others; the
        environments as :func:`environments_of` reads ``environment``.
        """
        environments, public_only = environments_of(environment)
        filters = RequestFilter(
            kinds=kinds_of(kind), environments=environments, public_only=public_only
        )
        after = self._search_cursors.after_time(cursor)
        self._settle(project)
        rows = self._store.page(project, filters, after, limit + 1, search=query)
        page, next_cursor = self._search_cursors.next_page(rows, limit, _position)
        hits = []
        for row in page:
            found = matched_fields(row, query)
            # The store matched the concatenated text; a match that spans two values is not
            # a match of any one field, so it is not a hit.
            if found:
                hits.append(Hit(row, found))
        return HitPage(hits, next_cursor)

    def delete(self, project: str, metadata: dict[str, Any] | None) -> tuple[int, datetime]:
        """Delete every record whose metadata has all the given pairs."""
        if not metadata:
            raise ValidationFailed(
                "metadata", "metadata must name at least one key/value pair to match"
            )
        wanted = {str(k): metadata_text(v) for k, v in metadata.items()}
        self._settle(project)
        # Every environment's: a delete by metadata leaves no matching record anywhere.
        everywhere = RequestFilter(metadata=wanted, public_only=False)
        count = self._store.delete_matching(project, everywhere)
        return count, utc_now_ms()

    def environments(self, project: str) -> list[tuple[str, int]]:
        """Return every environment of the project's records, by name, with their number."""
        self._settle(project)
        return self._store.environments(project)

    def _settle(self, project: str) -> None:
        """Wait for records this collector acknowledged but is still storing."""
        if self._pending is not None:
            self._pending.wait(project)


def kinds_of(kind: str | None, every: bool = False, field: str = "kind") -> tuple[str, ...] | None:
    """Return the record kinds a ``kind=`` parameter keeps (None: every kind).

    Comma-separated kinds, or ``all``; without it the model calls (``llm``, ``embedding``),
    or every kind if ``every`` (a trace's own list). An unknown kind is a 400 naming ``field``.
    """
    if kind is None or not kind.strip():
        return None if every else MODEL_CALL_KINDS
    names = [name.strip() for name in kind.split(",") if name.strip()]
    if names == ["all"]:
        return None
    unknown = [name for name in names if name not in RECORD_KINDS]
    if unknown:
        raise ValidationFailed(
            field,
            f"kind must be 'all' or comma-separated kinds of {', '.join(RECORD_KINDS)}; "
            f"not {unknown[0]!r}",
        )
    return tuple(dict.fromkeys(names))


def environments_of(
    environment: str | None, every: bool = False, field: str = "environment"
) -> tuple[tuple[str, ...] | None, bool]:
    """Return the environments an ``environment=`` parameter keeps (None: every one) and
    whether the service's own (``promptrail-…``) are left out.

    Comma-separated names, or ``all``; without it every environment but the service's own,
    or every one if ``every`` (a read by trace or session). A malformed name is a 400 naming
    ``field``.
    """
    if environment is None or not environment.strip():
        return None, not every
    names = [name.strip() for name in environment.split(",") if name.strip()]
    if names == ["all"]:
        return None, False
    for name in names:
        if not re.fullmatch(ENVIRONMENT_PATTERN, name):
            raise ValidationFailed(
                field,
                "environment must be 'all' or comma-separated names of 1-40 of [a-z0-9_-]; "
                f"not {name[:50]!r}",
            )
    return tuple(dict.fromkeys(names)), False


def request_filter(
    *,
    prompt_name: str | None = None,
    status: str | None = None,
    model: str | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    metadata: dict[str, Any] | None = None,
    trace_id: str | None = None,
    scores: tuple[ScoreTest, ...] = (),
    scores_table: str = "",
    field_prefix: str = "",
    kinds: tuple[str, ...] | None = None,
    environments: tuple[tuple[str, ...] | None, bool] = (None, True),
) -> RequestFilter:
    """Return the store's filter of a list or export as a client gives it.

    Dates are ISO 8601 or ``YYYY-MM-DD`` (a date-only end includes its whole day); a bad one
    is a 400 naming ``<field_prefix>start_date`` or ``end_date``. Metadata values compare as
    text. ``environments`` is what :func:`environments_of` returns (default: every
    environment but the service's own).
    """
    return RequestFilter(
        prompt_name=prompt_name,
        status=status,
        model=model,
        start=parse_date(start_date, f"{field_prefix}start_date") if start_date else None,
        end=parse_date(end_date, f"{field_prefix}end_date", end_of_day=True) if end_date else None,
        metadata={str(k): metadata_text(v) for k, v in (metadata or {}).items()},
        trace_id=trace_id,
        scores=scores,
        scores_table=scores_table,
        kinds=kinds,
        environments=environments[0],
        public_only=environments[1],
    )


def is_score_param(key: str) -> bool:
    """Whether a query parameter is a score filter (``score.<name>…``, ``unscored``)."""
    return key.startswith("score.") or key == "unscored"


def score_tests(params: Sequence[tuple[str, str]], field_prefix: str = "") -> tuple[ScoreTest, ...]:
    """Parse ``score.<name>.min=<n>``, ``score.<name>.max=<n>``, ``score.<name>=<value>`` and
    ``unscored=<name>``; a bad one is a 400 naming it."""
    tests: list[ScoreTest] = []
    for key, value in params:
        field = f"{field_prefix}{key}"
        if key == "unscored":
            if not 1 <= len(value) <= 100:
                raise ValidationFailed(field, "unscored names a score (1 to 100 characters)")
            tests.append(ScoreTest(value, "unscored"))
            continue
        name = key.removeprefix("score.")
        kind = "eq"
        for bound in ("min", "max"):
            if name.endswith(f".{bound}"):
                name, kind = name.removesuffix(f".{bound}"), bound
        if not 1 <= len(name) <= 100:
            raise ValidationFailed(field, "score filters are score.<name>[.min|.max]=<value>")
        if kind == "eq":
            tests.append(ScoreTest(name, kind, value))
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValidationFailed(field, f"{key} must be a number") from None
        if not math.isfinite(number):
            raise ValidationFailed(field, f"{key} must be a finite number")
        tests.append(ScoreTest(name, kind, number))
    return tuple(tests)


def _position(row: RequestRow) -> Position:
    """A record's place in the log's order, newest first: what its list's cursor holds."""
    return time_key(row.created_at, row.id)
