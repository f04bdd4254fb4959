"""What the trace, session and user reads share: the tables' names, a trace's or a
session's page of records from ``thread_items``, the sums of sessions or users over a period,
and the session and user lists' pages from the activity rollup.

Apart from :mod:`.traces`, :mod:`.sessions` and :mod:`.users` because each of those reads
through these, and none of them owns them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import (
    PAGE_READ,
    SLACK,
    RequestFilter,
    anchor_of,
    environment_clauses,
    windows,
)
from .request_rows import LIST_COLUMNS, RequestRow, item_row, read_whole_copies
from .request_tables import REQUEST_ITEMS, REQUEST_METADATA, TRACE_RECORDS
from .schema import quote
from .thread_tables import ACTIVITY_ROLLUP, THREAD_ITEMS

# What a trace's summary reads beside a page's list columns (LIST_COLUMNS, 9 of them) from
# ``thread_items``, which its list items do not show: a first page that holds the whole trace
# is its summary too (traces._trace_summary), the rest read from the page's records.
_TRACE_SUMS = "user_id, session_id"
# What the sums of sessions and users read of each record (:meth:`ThreadReads._sums`): its key,
# and every column their sums, ``kinds`` and environments read.
_SUMMED = (
    "created_at, id, kind, environment, user_id, session_id, status, total_tokens, "
    "estimated_cost_usd, trace_id"
)

# A row of the session list (with its records' ids) or of the user list.
_Item = TypeVar("_Item")


class ThreadReads:
    """The tables and the shared reads of traces, sessions and users."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        db = quote(database)
        self.traces_table = f"{db}.{quote(TRACE_RECORDS.name)}"
        self.items_table = f"{db}.{quote(REQUEST_ITEMS.name)}"
        self.metadata_table = f"{db}.{quote(REQUEST_METADATA.name)}"
        self.rollup_table = f"{db}.{quote(ACTIVITY_ROLLUP.name)}"
        self.threads_table = f"{db}.{quote(THREAD_ITEMS.name)}"

    # -- the rollup ------------------------------------------------------------------------

    def _rolled_page(
        self,
        project: str,
        key: str,
        scope: tuple[tuple[datetime, datetime], Sequence[str] | None, str | None],
        after: tuple[datetime, str] | None,
        limit: int,
        exact: Callable[[list[str]], list[_Item]],
        position: Callable[[_Item], tuple[datetime, str]],
        named: bool = False,
    ) -> list[_Item]:
        """Return a page of sessions or users, latest activity first, after ``after``.

        The rollup gives candidates in the order of a latest time that is exact or too late
        (never too early: deletes only lower it, and the period's end clips it); each is then
        summed exactly (``exact``) over its live records of the period. A summed candidate is
        placed once it is no older than the last candidate read: every candidate not yet read
        is older than that. Candidates above ``after`` whose time is exact belonged to earlier
        pages and are not read again; only those with tombstones (or records past the period)
        are, so a deep page reads little more than a first one.

        The rollup has no environments: with ``named`` (the sums keep named environments
        alone) every candidate's time is taken as too late and read again. Without, the
        default view's sums (every environment but the service's own) keep the rollup's
        times as exact: a session or user whose latest record is the service's own (which
        carries no session or user of a client's) is the one case they are not, and such a
        key may then be placed one page late.
        """
        pending: list[_Item] = []
        cursor: tuple[datetime, str] | None = None
        fetch = limit + SLACK
        (start, end), _, _ = scope
        # The rollup's days a read covers, a window at a time (the anchor's day alone, then the
        # day before it too, then 8, then the whole period: see request_filters.windows). A
        # key's latest time lies on its newest day, so every key with a day in a window is
        # later than every key without one: a window's candidates, latest first, are the
        # period's, and a read that does not fill its fetch goes on below them in the next
        # window. The anchor's day first: at 100M records a day holds ~70,000 sessions' rows,
        # grouped for every page, and the anchor's day and the one before twice that.
        # Not for a user's sessions: the rollup's users of a session are tested over the days
        # read, and a session's user may have records only on older days.
        bounds = RequestFilter(start=start, end=end)
        lowers = [anchor_of(bounds, after), *windows(bounds, after)] if scope[2] is None else [None]
        while True:
            candidates = self._candidates(
                project, key, scope, cursor, after, fetch, lowers[0], named
            )
            if candidates:
                summed = exact([value for _, value in candidates])
                pending += [s for s in summed if after is None or position(s) < after]
                pending.sort(key=position, reverse=True)
            if len(candidates) < fetch:
                if lowers[0] is None:
                    return pending[:limit]
                lowers = lowers[1:]
            if candidates:
                cursor = candidates[-1]
            if cursor is None:
                continue
            ready = [s for s in pending if position(s) >= cursor]
            if len(ready) >= limit:
                return ready[:limit]

    def _candidates(
        self,
        project: str,
        key: str,
        scope: tuple[tuple[datetime, datetime], Sequence[str] | None, str | None],
        cursor: tuple[datetime, str] | None,
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None,
        named: bool = False,
    ) -> list[tuple[datetime, str]]:
        """Return (latest time, at most, in the period; value) of the rollup's keys with a
        day at or after ``lower``'s (None: the period's first), latest first, below
        ``cursor``; above ``after`` only those whose time may be too late.

        Whether a key's time may be too late is read from its rows of these days only: a
        record's tombstone lies on the record's day, so a key's latest record, on its newest
        day, is live unless that day counts a tombstone.
        """
        (start, end), kinds, user_id = scope
        params: dict[str, Any] = {
            "project": project,
            "key": key,
            "start": start,
            "end": end,
            "limit": limit,
            "lower": max(start, lower) if lower is not None else start,
        }
        where = [
            "project = {project:String}",
            "key = {key:String}",
            "day >= toDate({lower:DateTime64(3, 'UTC')})",
            "day <= toDate({end:DateTime64(3, 'UTC')})",
        ]
        if kinds is not None:
            where.append("kind IN {kinds:Array(String)}")
            params["kinds"] = list(kinds)
        # A key with no record at or after the start has none in the period.
        having = ["max(last_at) >= {start:DateTime64(3, 'UTC')}"]
        if user_id is not None:
            having.append("has(groupUniqArrayArray(user_ids), {user_id:String})")
            params["user_id"] = user_id
        if cursor is not None:
            having.append("(bound, value) < ({cursor_at:DateTime64(3, 'UTC')}, {cursor_id:String})")
            params.update(cursor_at=cursor[0], cursor_id=cursor[1])
        if after is not None:
            having.append(
                "((bound, value) < ({after_at:DateTime64(3, 'UTC')}, {after_id:String}) OR inexact)"
            )
            params.update(after_at=after[0], after_id=after[1])
        rows = self._client.query(
            "SELECT value, least(max(last_at), {end:DateTime64(3, 'UTC')}) AS bound, "
            "sum(tombstones) > 0 OR max(last_at) > {end:DateTime64(3, 'UTC')}"
            f"{' OR 1' if named else ''} AS inexact "
            f"FROM {self.rollup_table} WHERE {' AND '.join(where)} GROUP BY value "
            f"HAVING {' AND '.join(having)} "
            "ORDER BY bound DESC, value DESC LIMIT {limit:UInt32}",
            parameters=params,
        ).result_rows
        return [(utc(r[1]), str(r[0])) for r in rows]

    # -- shared ----------------------------------------------------------------------------

    def _sums(
        self,
        project: str,
        key: str,
        values: Sequence[str],
        scope: tuple[tuple[datetime, datetime], Sequence[str] | None],
        select: str,
        having: str,
        params: dict[str, Any],
        *,
        every_kind: bool = False,
        environments: RequestFilter | None = None,
        final: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Group the live records of ``kinds`` in the period of these sessions or users
        (``key``) by session or user: ``SELECT value, <select>``, latest activity first. With
        ``every_kind`` the records of every kind are grouped, ``picked`` telling those of
        ``kinds``. ``environments`` (its environments' fields) narrows what the sums keep as
        ``kinds`` does.

        A primary-key read of each one's rows of ``thread_items``, its records' copies and
        tombstones resolved by a ``GROUP BY`` per record under the ``GROUP BY`` per key: a
        record is its copies' one row, and none if a copy is a tombstone (the tombstone's
        version is the higher; every copy, a tombstone too, carries the record's columns, so
        grouping by them all is grouping by its key). It was FINAL over the same rows, which
        at 100M records (21 parts, 2.3M granules) cost a page of 28 sessions ~95 ms of CPU
        against ~38 for this; at 1M records FINAL had been the faster (this, 1.5x its time).
        With ``final``, FINAL over those rows as before: a user's sums (a user has many
        records, ~500 in the benchmark's, where FINAL stays the cheaper at 1M records, the
        user list ~5 ms p95 faster over HTTP, and they were even at 100M).
        """
        (period, kinds) = scope
        params.update(project=project, key=key, values=list(values))
        where = [
            "project = {project:String}",
            "key = {key:String}",
            "value IN {values:Array(String)}",
            _period(period, params),
        ]
        picked = "1"
        if kinds is not None:
            params["kinds"] = list(kinds)
            if every_kind:
                picked = "kind IN {kinds:Array(String)}"
            else:
                # Every copy of a record has its kind: a record is kept or left whole.
                where.append("kind IN {kinds:Array(String)}")
        kept = environment_clauses(environments, params) if environments is not None else []
        if kept and every_kind:
            picked = " AND ".join([picked, *kept])
        else:
            where += kept
        records = f"SELECT value, {_SUMMED} FROM {self.threads_table} " + (
            f"FINAL WHERE {' AND '.join(where)}"
            if final
            else f"WHERE {' AND '.join(where)} GROUP BY value, {_SUMMED} HAVING max(is_deleted) = 0"
        )
        return [
            tuple(r)
            for r in self._client.query(
                f"WITH {picked} AS picked SELECT value, {select} FROM ({records}) "
                f"GROUP BY value {having}ORDER BY last_at DESC, value DESC",
                parameters=params,
            ).result_rows
        ]

    def _thread_page(
        self,
        project: str,
        key: str,
        value: str,
        after: tuple[datetime, str] | None,
        limit: int,
        kinds: Sequence[str] | None,
    ) -> tuple[list[RequestRow], list[tuple[RequestRow, str, str]] | None]:
        """Return the live records of one trace or session (``key``: 'trace_id' or
        'session_id') oldest first, after a keyset position; and, for a trace whose first
        page's read holds all its rows, all its live records with their user and session
        ids, else None.

        One primary-key range read of ``thread_items`` a page: its rows hold every copy and
        tombstone of the records, resolved as a list page does (a record is live when no copy
        of it is a tombstone; a read cut by LIMIT leaves its last record for the next read).
        A session's page then looks up its records' list items (:meth:`_listed`).
        """
        found: list[RequestRow] = []
        whole: list[tuple[RequestRow, str, str]] | None = None
        position = after
        fetch = limit + SLACK
        params: dict[str, Any] = {"project": project, "key": key, "value": value}
        where = "project = {project:String} AND key = {key:String} AND value = {value:String}"
        if kinds is not None:
            # Every copy of a record has its kind: a run of copies is kept or left whole.
            where += " AND kind IN {kinds:Array(String)}"
            params["kinds"] = list(kinds)
        sums = f"{_TRACE_SUMS}, " if key == "trace_id" and after is None else ""
        while len(found) < limit:
            clause = where
            if position is not None:
                clause += (
                    " AND (created_at, id) > ({after_at:DateTime64(3, 'UTC')}, {after_id:String})"
                )
                params.update(after_at=position[0], after_id=position[1])

            def read(fetch: int, clause: str = clause, sums: str = sums) -> list[tuple[Any, ...]]:
                return [
                    tuple(r)
                    for r in self._client.query(
                        f"SELECT {LIST_COLUMNS}, {sums}trace_id, is_deleted "
                        f"FROM {self.threads_table} "
                        f"WHERE {clause} ORDER BY created_at, id LIMIT {{limit:UInt32}}",
                        parameters={**params, "limit": fetch},
                        settings=PAGE_READ,
                    ).result_rows
                ]

            runs, complete, fetch = read_whole_copies(read, fetch)
            live = [run[0] for run in runs if not any(r[-1] for r in run)]
            live = self._listed(project, live, -2)
            records = [item_row(r) for r in live]
            if sums and complete:  # the trace's first read, all of it
                whole = [(row, str(r[9]), str(r[10])) for row, r in zip(records, live, strict=True)]
            sums = ""
            found += records
            if runs:
                last = runs[-1][0]
                position = (utc(last[1]), str(last[0]))
            if complete:
                break
        return found[:limit], whole

    def _listed(
        self, project: str, rows: list[tuple[Any, ...]], trace_at: int
    ) -> list[tuple[Any, ...]]:
        """Return ``rows`` of ``thread_items`` (LIST_COLUMNS first, the record's trace id at
        ``trace_at``) with the list columns of each row stored without them: a session's row
        since migration 39 (thread_tables._LISTED). A record in a trace takes them from the
        trace's row of the same record, one in no trace from the list copy, both primary-key
        lookups in one query; a record deleted meanwhile (no live row left) is left out.
        """
        narrow = [r for r in rows if r[4] == ""]
        if not narrow:
            return rows
        params: dict[str, Any] = {"project": project}
        reads = []
        traced = [r for r in narrow if r[trace_at]]
        if traced:
            # The traces and the ids apart, not (trace, time, id) tuples: ~1 ms less at 50
            # records, the same rows (an id is one record's, in one trace; a row of another
            # time is matched to no key below).
            reads.append(
                f"SELECT {LIST_COLUMNS} FROM {self.threads_table} "
                "WHERE project = {project:String} AND key = 'trace_id' "
                "AND value IN {traces:Array(String)} AND id IN {ids:Array(String)} "
                "AND is_deleted = 0"
            )
            params["traces"] = sorted({str(r[trace_at]) for r in traced})
            params["ids"] = [str(r[0]) for r in traced]
        alone = [(utc(r[1]), str(r[0])) for r in narrow if not r[trace_at]]
        if alone:
            reads.append(
                f"SELECT {LIST_COLUMNS} FROM {self.items_table} "
                "WHERE project = {project:String} AND (created_at, id) IN "
                "{alone:Array(Tuple(DateTime64(3, 'UTC'), String))} AND is_deleted = 0"
            )
            params["alone"] = alone
        found = {
            (str(r[0]), r[1]): tuple(r)
            for r in self._client.query(
                " UNION ALL ".join(reads), parameters=params, settings=PAGE_READ
            ).result_rows
        }
        listed = []
        for row in rows:
            if row[4] != "":
                listed.append(row)
            elif (item := found.get((str(row[0]), row[1]))) is not None:
                listed.append(item + row[len(item) :])
        return listed


def _period(period: tuple[datetime, datetime], params: dict[str, Any]) -> str:
    """Return the condition of records created in ``period`` (``params`` get its bounds)."""
    params.update(start=period[0], end=period[1])
    return "created_at >= {start:DateTime64(3, 'UTC')} AND created_at <= {end:DateTime64(3, 'UTC')}"
