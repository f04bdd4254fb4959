"""Sessions (docs/api-notes.md, "Traces, sessions and users"): sums over the period's records
that carry a ``session_id`` in their metadata.

The list takes candidates, latest first, from the activity rollup, then sums each candidate
exactly over its records in the period, from its rows of ``thread_items``
(:class:`.threads.ThreadReads`); one session is one range read of its rows there, and one
lookup of its page's list items (its rows do not carry them since migration 39). Apart from
traces and users because a session's summary and its page are read and summed in ways of
their own (:meth:`SessionReads.session`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .connection import utc
from .request_filters import PAGE_READ, RequestFilter
from .request_rows import LIST_COLUMNS, RequestRow, group_copies, item_row
from .threads import ThreadReads

# What a session's summary and scores read of each row of ``thread_items``, after the 9 list
# columns (or, where no page is read, stand-ins for them: the key and the kind, the rest empty).
_SESSION_SUMS = "user_id, status, trace_id, total_tokens, estimated_cost_usd"
_NO_LIST_COLUMNS = "id, created_at, '', '', '', '', false, kind, environment"
# The most rows of a session one read takes with their list columns, to be its summary and its
# page at once; a session with more reads its summary and its page apart.
_WHOLE_SESSION = 1000


@dataclass(frozen=True)
class SessionSummary:
    """What the session list shows of a session."""

    session_id: str
    user_ids: list[str]
    first_at: datetime
    last_at: datetime
    records: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float


class SessionReads(ThreadReads):
    """The reads of sessions: the session list and one session."""

    def session_page(
        self,
        project: str,
        period: tuple[datetime, datetime],
        kinds: Sequence[str] | None,
        user_id: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
        environments: RequestFilter | None = None,
    ) -> list[tuple[SessionSummary, list[tuple[str, str]]]]:
        """Return sessions of the period, latest activity first, after a keyset position,
        each with (record id, trace id) of its live records of every kind in the period (for
        its scores); summed over the records of ``environments`` (its environment fields)."""

        def exact(values: list[str]) -> list[tuple[SessionSummary, list[tuple[str, str]]]]:
            return self._sessions(project, values, period, kinds, user_id, environments)

        return self._rolled_page(
            project,
            "session_id",
            (period, kinds, user_id),
            after,
            limit,
            exact,
            lambda s: (s[0].last_at, s[0].session_id),
            named=environments is not None and environments.environments is not None,
        )

    def session(
        self,
        project: str,
        session_id: str,
        kinds: Sequence[str] | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> tuple[SessionSummary, list[tuple[str, str]], list[RequestRow]] | None:
        """Return one session's summary over all its records of ``kinds``, (record id, trace
        id) of its live records of every kind, and its live records of ``kinds`` oldest first
        after a keyset position (None if it has no record of ``kinds``).

        One range read of the session's rows of ``thread_items``, summed here, then one
        lookup of the list items of the page's records (its rows carry none since migration
        39; rows stored before do, and need none: ``ThreadReads._listed``). The rows come in
        key order, so a record's copies are adjacent and resolve as a page's do; summing them
        here costs less than ClickHouse grouping them twice (records, then the session), the
        session's rows being few. A session of up to
        ``_WHOLE_SESSION`` rows is its page too; a bigger one reads its rows again without
        their list items, and its page apart. It was two queries (the summary, then the page)
        for every session.
        """
        rows = self._session_rows(project, session_id, LIST_COLUMNS, _WHOLE_SESSION)
        whole = len(rows) < _WHOLE_SESSION
        if not whole:
            rows = self._session_rows(project, session_id, _NO_LIST_COLUMNS, None)
        live = [run[0] for run in group_copies(rows) if not any(r[-1] for r in run)]
        picked = [r for r in live if kinds is None or r[7] in kinds]
        if not picked:
            return None
        summary = SessionSummary(
            session_id=session_id,
            user_ids=sorted({str(r[9]) for r in picked if r[9]}),
            first_at=utc(picked[0][1]),
            last_at=utc(picked[-1][1]),
            records=len(picked),
            errors=sum(1 for r in picked if r[10] == "error"),
            total_tokens=sum(int(r[12]) for r in picked),
            estimated_cost_usd=sum(float(r[13]) for r in picked),
        )
        records = [(str(r[0]), str(r[11])) for r in live]
        if not whole:
            page, _ = self._thread_page(project, "session_id", session_id, after, limit, kinds)
            return summary, records, page
        if after is not None:
            picked = [r for r in picked if (utc(r[1]), str(r[0])) > after]
        return summary, records, [item_row(r) for r in self._listed(project, picked[:limit], 11)]

    def _session_rows(
        self, project: str, session_id: str, columns: str, limit: int | None
    ) -> list[tuple[Any, ...]]:
        """Return a session's rows of ``thread_items`` in key order (``columns``, then
        _SESSION_SUMS and ``is_deleted``), at most ``limit``."""
        params: dict[str, Any] = {"project": project, "session_id": session_id}
        cut = ""
        if limit is not None:
            cut = " LIMIT {limit:UInt32}"
            params["limit"] = limit
        return [
            tuple(r)
            for r in self._client.query(
                f"SELECT {columns}, {_SESSION_SUMS}, is_deleted FROM {self.threads_table} "
                "WHERE project = {project:String} "
                "AND key = 'session_id' AND value = {session_id:String} "
                f"ORDER BY created_at, id{cut}",
                parameters=params,
                settings=PAGE_READ,
            ).result_rows
        ]

    def _sessions(
        self,
        project: str,
        session_ids: Sequence[str],
        period: tuple[datetime, datetime],
        kinds: Sequence[str] | None,
        user_id: str | None,
        environments: RequestFilter | None = None,
    ) -> list[tuple[SessionSummary, list[tuple[str, str]]]]:
        """Sum these sessions over their live records of ``kinds`` in the period, latest
        activity first, each with (record id, trace id) of its live records of every kind in
        the period; a session with none of ``kinds`` (or without ``user_id`` among its users)
        is left out.

        One read for both: the sums take the records of ``kinds`` (``picked``) among the
        session's records of every kind, where a second query read those again for the ids.
        """
        params: dict[str, Any] = {}
        having = "HAVING records > 0 "
        if user_id is not None:
            having += "AND has(user_ids, {user_id:String}) "
            params["user_id"] = user_id
        rows = self._sums(
            project,
            "session_id",
            session_ids,
            (period, kinds),
            "arraySort(groupUniqArrayIf(user_id, user_id != '' AND picked)) AS user_ids, "
            "minIf(created_at, picked), maxIf(created_at, picked) AS last_at, "
            "countIf(picked) AS records, countIf(status = 'error' AND picked), "
            "sumIf(total_tokens, picked), sumIf(estimated_cost_usd, picked), "
            "groupArray((id, trace_id))",
            having,
            params,
            every_kind=True,
            environments=environments,
        )
        return [
            (
                SessionSummary(
                    session_id=str(r[0]),
                    user_ids=[str(u) for u in r[1]],
                    first_at=utc(r[2]),
                    last_at=utc(r[3]),
                    records=int(r[4]),
                    errors=int(r[5]),
                    total_tokens=int(r[6]),
                    estimated_cost_usd=float(r[7]),
                ),
                [(str(i), str(t)) for i, t in r[8]],
            )
            for r in rows
        ]
