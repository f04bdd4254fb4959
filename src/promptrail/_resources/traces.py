"""``client.traces``, ``client.sessions`` and ``client.users`` (docs/api-notes.md, "Traces,
sessions and users").

Each endpoint is described once, by a function returning a :class:`~promptrail._api_call.Call`;
the sync and async classes only send them. ``get`` reads a trace or session whole: its records
come a page at a time (oldest first) and are joined into one object.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import httpx

from .._api_call import (
    Call,
    DateLike,
    Page,
    data_of,
    page_of,
    params,
    read_json,
    segment,
)
from .._http import AsyncHTTP, SyncHTTP
from .._types import Session, Trace, User

W = TypeVar("W", Trace, Session)
# How many records each page of a whole trace or session brings (the most the API gives):
# a session's pages hold at most 100, a trace's 1,000 (issue 32: few round trips for a big one).
_SESSION_PAGE = 100
_TRACE_PAGE = 1000


def _list(path: str, model: type[Any], **filters: Any) -> Callable[[str | None], Call[Page[Any]]]:
    def page(cursor: str | None) -> Call[Page[Any]]:
        return Call("GET", path, page_of(model), params=params(**filters, cursor=cursor))

    return page


def _part(model: type[W], path: str, kind: str | None) -> Callable[[str | None], Call[Page[W]]]:
    """The calls of a trace's or session's pages: each a Page of one object (its records)."""
    read = data_of(model)
    size = _TRACE_PAGE if model is Trace else _SESSION_PAGE

    def parse(response: httpx.Response) -> Page[W]:
        pagination = read_json(response).get("pagination") or {}
        return Page([read(response)], pagination.get("next_cursor") or None)

    def page(cursor: str | None) -> Call[Page[W]]:
        query = params(limit=size, cursor=cursor, kind=kind)
        return Call("GET", path, parse, params=query)

    return page


def _joined(parts: list[W]) -> W:
    """One trace or session from its pages: the first page's summary, every page's records."""
    first = parts[0]
    return first.model_copy(update={"items": [r for part in parts for r in part.items]})


def _traces(**filters: Any) -> Callable[[str | None], Call[Page[Trace]]]:
    return _list("/v1/traces", Trace, **filters)


def _sessions(**filters: Any) -> Callable[[str | None], Call[Page[Session]]]:
    return _list("/v1/sessions", Session, **filters)


def _users(**filters: Any) -> Callable[[str | None], Call[Page[User]]]:
    return _list("/v1/users", User, **filters)


def _trace_path(trace_id: str) -> str:
    return f"/v1/traces/{segment(trace_id)}"


def _session_path(session_id: str) -> str:
    return f"/v1/sessions/{segment(session_id)}"


class Traces:
    """``client.traces``: the trace list and whole traces."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Trace]:
        """Iterate over traces, newest first, fetching pages of ``limit`` as needed.

        Filters: the period the traces began in, their user, session or root span name.
        """
        filters = dict(start_date=start_date, end_date=end_date, user_id=user_id)
        return self._http.paginate(
            _traces(**filters, session_id=session_id, name=name, limit=limit)
        )

    def get(self, trace_id: str) -> Trace:
        """Return one trace with every record, oldest first (``TRACE_NOT_FOUND`` if none)."""
        return _joined(list(self._http.paginate(_part(Trace, _trace_path(trace_id), None))))


class AsyncTraces:
    """``client.traces`` of the async client (see :class:`Traces`)."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Trace]:
        """Iterate (``async for``) over traces, newest first, page by page as needed."""
        filters = dict(start_date=start_date, end_date=end_date, user_id=user_id)
        return self._http.paginate(
            _traces(**filters, session_id=session_id, name=name, limit=limit)
        )

    async def get(self, trace_id: str) -> Trace:
        """Return one trace with every record, oldest first."""
        pages = self._http.paginate(_part(Trace, _trace_path(trace_id), None))
        return _joined([part async for part in pages])


class Sessions:
    """``client.sessions``: the session list and whole sessions (conversations)."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        user_id: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Session]:
        """Iterate over the period's sessions (default: 30 days), latest activity first.

        Their sums are over their model calls unless ``kind`` names other kinds (or ``all``).
        """
        filters = dict(user_id=user_id, start_date=start_date, end_date=end_date)
        return self._http.paginate(_sessions(**filters, kind=kind, limit=limit))

    def get(self, session_id: str, *, kind: str | None = None) -> Session:
        """Return one session with its records oldest first (its model calls unless ``kind``)."""
        pages = self._http.paginate(_part(Session, _session_path(session_id), kind))
        return _joined(list(pages))


class AsyncSessions:
    """``client.sessions`` of the async client (see :class:`Sessions`)."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        user_id: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Session]:
        """Iterate (``async for``) over the period's sessions, latest activity first."""
        filters = dict(user_id=user_id, start_date=start_date, end_date=end_date)
        return self._http.paginate(_sessions(**filters, kind=kind, limit=limit))

    async def get(self, session_id: str, *, kind: str | None = None) -> Session:
        """Return one session with its records oldest first."""
        pages = self._http.paginate(_part(Session, _session_path(session_id), kind))
        return _joined([part async for part in pages])


class Users:
    """``client.users``: each user's totals."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> Iterator[User]:
        """Iterate over the period's users (default: 30 days), latest activity first."""
        return self._http.paginate(
            _users(start_date=start_date, end_date=end_date, kind=kind, limit=limit)
        )


class AsyncUsers:
    """``client.users`` of the async client (see :class:`Users`)."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    def list(
        self,
        *,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[User]:
        """Iterate (``async for``) over the period's users, latest activity first."""
        return self._http.paginate(
            _users(start_date=start_date, end_date=end_date, kind=kind, limit=limit)
        )
