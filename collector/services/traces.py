"""Traces, sessions and users (docs/api-notes.md, "Traces, sessions and users"): lists and one of
each, over the request log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from ..errors import SessionNotFound, TraceNotFound, ValidationFailed
from ..store.request_filters import RequestFilter
from ..store.request_rows import RequestRow
from ..store.score_rows import ScoreValue
from ..store.sessions import SessionSummary
from ..store.traces import TraceFilter, TraceStore, TraceSummary
from ..store.users import UserSummary
from ..store.writes import PendingWrites
from .cursors import CursorCodec, time_key
from .dates import parse_date, utc_now_ms
from .requests import environments_of, kinds_of
from .scores import Scores, ScoreService, means_per_record, score_means

# The period the session and user lists cover when not given one (docs/api-notes.md, "Traces,
# sessions and users").
DEFAULT_PERIOD = timedelta(days=30)


S = TypeVar("S")


@dataclass(frozen=True)
class SummaryPage(Generic[S]):
    """A page of summaries (traces, sessions: each with its scores; users) and the cursor of
    the next one."""

    items: list[S]
    next_cursor: str | None


@dataclass(frozen=True)
class Detail(Generic[S]):
    """One trace or session: its summary, scores, a page of its records (oldest first) and
    each record's scores."""

    summary: S
    scores: Scores
    rows: list[RequestRow]
    row_scores: dict[str, Scores]
    next_cursor: str | None


class TraceService:
    """Traces, sessions and users of one project at a time."""

    def __init__(
        self,
        store: TraceStore,
        scores: ScoreService,
        cursor_secret: str,
        pending: PendingWrites | None = None,
    ) -> None:
        self._store = store
        self._scores = scores
        self._pending = pending
        self._trace_cursors = CursorCodec(cursor_secret, "traces")
        self._record_cursors = CursorCodec(cursor_secret, "trace records")
        self._session_cursors = CursorCodec(cursor_secret, "sessions")
        self._session_record_cursors = CursorCodec(cursor_secret, "session records")
        self._user_cursors = CursorCodec(cursor_secret, "users")

    # -- traces ----------------------------------------------------------------------------

    def trace_page(
        self,
        project: str,
        limit: int,
        cursor: str | None,
        *,
        start_date: str | None = None,
        end_date: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        environment: str | None = None,
    ) -> SummaryPage[tuple[TraceSummary, Scores]]:
        """Return traces newest first (by their first record), keyset-paginated; those with
        a record of the environments :func:`environments_of` reads in ``environment`` (a
        session's: every environment)."""
        start, end = _dates(start_date, end_date)
        environments, public_only = environments_of(environment, every=session_id is not None)
        filters = TraceFilter(start, end, user_id, session_id, name, environments, public_only)
        after = self._trace_cursors.after_time(cursor)
        self._settle(project)
        found = self._store.trace_page(project, filters, after, limit + 1)
        page, next_cursor = self._trace_cursors.next_page(
            found, limit, lambda t: time_key(t.started_at, t.trace_id)
        )
        scores = self._trace_scores(project, page)
        return SummaryPage([(t, scores.get(t.trace_id, {})) for t in page], next_cursor)

    def trace(
        self, project: str, trace_id: str, limit: int, cursor: str | None
    ) -> Detail[TraceSummary]:
        """Return one trace and a page of its records, oldest first; 404 TRACE_NOT_FOUND."""
        after = self._record_cursors.after_time(cursor)
        self._settle(project)
        summary, rows = self._store.trace(project, trace_id, after, limit + 1)
        if summary is None:
            raise TraceNotFound(trace_id)
        page, next_cursor = self._records_page(self._record_cursors, rows, limit)
        # One read of the scores on the trace and on any of its records: the trace's, as the
        # list shows them, and (a subset) those of the page's records.
        scores = self._scores.on_targets(project, summary.record_ids, [trace_id])
        trace_scores = score_means(scores) if scores else {}
        return Detail(summary, trace_scores, page, _per_record(page, scores), next_cursor)

    def _trace_scores(self, project: str, traces: Sequence[TraceSummary]) -> dict[str, Scores]:
        """Per trace: the means of the scores on it and on its records."""
        if not traces:
            return {}
        trace_of = {record: t.trace_id for t in traces for record in t.record_ids}
        scores = self._scores.on_targets(project, list(trace_of), [t.trace_id for t in traces])
        if not scores:
            return {}
        grouped: dict[str, list[ScoreValue]] = {}
        for score in scores:
            trace = score.trace_id or trace_of.get(score.request_id or "")
            if trace:
                grouped.setdefault(trace, []).append(score)
        return {trace: score_means(found) for trace, found in grouped.items()}

    # -- sessions --------------------------------------------------------------------------

    def session_page(
        self,
        project: str,
        limit: int,
        cursor: str | None,
        *,
        user_id: str | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        kind: str | None = None,
        environment: str | None = None,
    ) -> SummaryPage[tuple[SessionSummary, Scores]]:
        """Return the period's sessions, latest activity first (model calls unless ``kind``;
        the environments :func:`environments_of` reads in ``environment``)."""
        period = _period(start_date, end_date)
        environments = _environments(environment)
        after = self._session_cursors.after_time(cursor)
        self._settle(project)
        found = self._store.session_page(
            project, period, kinds_of(kind), user_id, after, limit + 1, environments
        )
        page, next_cursor = self._session_cursors.next_page(
            found, limit, lambda s: time_key(s[0].last_at, s[0].session_id)
        )
        scores = self._session_scores(
            project, [(s.session_id, r, t) for s, records in page for r, t in records]
        )
        return SummaryPage([(s, scores.get(s.session_id, {})) for s, _ in page], next_cursor)

    def _session_scores(
        self, project: str, ids: Sequence[tuple[str, str, str]]
    ) -> dict[str, Scores]:
        """Per session of (session id, record id, trace id) of its records of the period:
        the means of the scores on the session, on those records and on their traces."""
        scores = self._scores.on_targets(
            project,
            [r for _, r, _ in ids],
            sorted({t for _, _, t in ids if t}),
            sorted({s for s, _, _ in ids}),
        )
        return _scores_by_session(ids, scores)

    def session(
        self,
        project: str,
        session_id: str,
        limit: int,
        cursor: str | None,
        kind: str | None = None,
    ) -> Detail[SessionSummary]:
        """Return one session and a page of its records, oldest first; 404 if it has none."""
        kinds = kinds_of(kind)
        after = self._session_record_cursors.after_time(cursor)
        self._settle(project)
        found = self._store.session(project, session_id, kinds, after, limit + 1)
        if found is None:
            raise SessionNotFound(session_id)
        summary, records, rows = found
        page, next_cursor = self._records_page(self._session_record_cursors, rows, limit)
        # One read of the scores on the session, on every record of it and on their traces:
        # the session's, and (a subset) those of the page's records, each of the session's.
        scores = self._scores.on_targets(
            project, [r for r, _ in records], sorted({t for _, t in records if t}), [session_id]
        )
        ids = [(session_id, record, trace) for record, trace in records]
        session_scores = _scores_by_session(ids, scores).get(session_id, {})
        return Detail(summary, session_scores, page, _per_record(page, scores), next_cursor)

    # -- users -----------------------------------------------------------------------------

    def user_page(
        self,
        project: str,
        limit: int,
        cursor: str | None,
        *,
        start_date: str | None = None,
        end_date: str | None = None,
        kind: str | None = None,
        environment: str | None = None,
    ) -> SummaryPage[UserSummary]:
        """Return the period's users, latest activity first (model calls unless ``kind``;
        the environments :func:`environments_of` reads in ``environment``)."""
        period = _period(start_date, end_date)
        environments = _environments(environment)
        after = self._user_cursors.after_time(cursor)
        self._settle(project)
        found = self._store.user_page(
            project, period, kinds_of(kind), after, limit + 1, environments
        )
        page, next_cursor = self._user_cursors.next_page(
            found, limit, lambda u: time_key(u.last_at, u.user_id)
        )
        return SummaryPage(page, next_cursor)

    # -- shared ----------------------------------------------------------------------------

    def _settle(self, project: str) -> None:
        """Wait for records this collector acknowledged but is still storing."""
        if self._pending is not None:
            self._pending.wait(project)

    @staticmethod
    def _records_page(
        codec: CursorCodec, rows: list[RequestRow], limit: int
    ) -> tuple[list[RequestRow], str | None]:
        return codec.next_page(rows, limit, lambda r: time_key(r.created_at, r.id))


def _per_record(rows: Sequence[RequestRow], scores: Sequence[ScoreValue]) -> dict[str, Scores]:
    """Per record: the means of its scores and its trace's, as list items show them."""
    return means_per_record([(row.id, row.trace_id) for row in rows], scores)


def _scores_by_session(
    ids: Sequence[tuple[str, str, str]], scores: Sequence[ScoreValue]
) -> dict[str, Scores]:
    """Per session of (session id, record id, trace id): the means of the scores on it, its
    records and their traces."""
    # By score id: a trace's score counts once however many of its records the session has.
    grouped: dict[str, dict[str, ScoreValue]] = {}
    for session, record, trace in ids:
        mine = grouped.setdefault(session, {})
        for s in scores:
            if s.request_id == record or (trace and s.trace_id == trace) or s.session_id == session:
                mine[s.id] = s
    return {
        session: score_means(_newest_first(list(found.values())))
        for session, found in grouped.items()
    }


def _newest_first(scores: list[ScoreValue]) -> list[ScoreValue]:
    return sorted(scores, key=lambda s: (s.created_at, s.id), reverse=True)


def _dates(start_date: str | None, end_date: str | None) -> tuple[datetime | None, datetime | None]:
    start = parse_date(start_date, "start_date") if start_date else None
    end = parse_date(end_date, "end_date", end_of_day=True) if end_date else None
    if start and end and start > end:
        raise ValidationFailed("start_date", "start_date must not be after end_date")
    return start, end


def _period(start_date: str | None, end_date: str | None) -> tuple[datetime, datetime]:
    """The period of a session or user list: the dates given, else the last 30 days."""
    start, end = _dates(start_date, end_date)
    end = end or utc_now_ms()
    start = start or end - DEFAULT_PERIOD
    if start > end:
        raise ValidationFailed("start_date", "start_date must not be after end_date")
    return start, end


def _environments(environment: str | None) -> RequestFilter:
    """The environments of a session or user list, as a request filter's fields."""
    environments, public_only = environments_of(environment)
    return RequestFilter(environments=environments, public_only=public_only)
