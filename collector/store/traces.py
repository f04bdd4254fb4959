"""Traces, sessions and users (CONTRACT 10), read from the request log's tables.

- A trace's summary is a primary-key read of ``trace_records`` (one row per record of a
  trace, sorted by trace), resolved with FINAL over those rows only; its pages, and a
  session's, are primary-key range reads of ``thread_items`` (the records of each trace,
  session and user, sorted by it), copies and tombstones resolved as list pages do.
- The trace list finds the newest traces in ``request_items`` (sorted by time) a window of
  time at a time, as a list page does, then sums each candidate in ``trace_records``.
- Sessions and users are sums over the period's records that carry a ``session_id`` or
  ``user_id`` in their metadata. Their lists take candidates, latest first, from a rollup
  (``ACTIVITY_ROLLUP``: per session or user, day and kind, the latest record and the number of
  tombstones), then sum each candidate exactly over its records in the period, from its rows
  of ``thread_items``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import PAGE_READ, SLACK, RequestFilter, windows
from .request_rows import LIST_COLUMNS, RequestRow, group_copies, item_row, whole_copies
from .request_tables import ITEM_NAMES, REQUEST_ITEMS, REQUEST_METADATA, REQUESTS, TRACE_RECORDS
from .schema import Table, View, quote

# The kinds counted as model calls.
_MODEL_CALL_KINDS = ("llm", "embedding")
_MODEL_CALLS = str(_MODEL_CALL_KINDS)
# Where a list item's tokens and cost sit in its packed ``item`` (1-based JSON positions).
_TOKENS = ITEM_NAMES.index("total_tokens") + 1
_COST = ITEM_NAMES.index("estimated_cost_usd") + 1
# A trace's name, user and session are its root record's (no parent), else its first
# record's that has one: argMin over this key prefers the root, then the oldest.
_ROOT_FIRST = "(parent_span_id != '', created_at)"
# What a trace's summary reads beside a page's list columns (LIST_COLUMNS, 8 of them) from
# ``thread_items``, which its list items do not show: a first page that holds the whole trace
# is its summary too (_trace_summary), the rest read from the page's records.
_TRACE_SUMS = "user_id, session_id"
# What a session's summary and scores read of each row of ``thread_items``, after the 8 list
# columns (or, where no page is read, stand-ins for them: the key and the kind, the rest empty).
_SESSION_SUMS = "user_id, status, trace_id, total_tokens, estimated_cost_usd"
_NO_LIST_COLUMNS = "id, created_at, '', '', '', '', false, kind"
# The most rows of a session one read takes with their list columns, to be its summary and its
# page at once; a session with more reads its summary and its page apart.
_WHOLE_SESSION = 1000

# The rollup the session and user lists take their candidates from: per (project, session or
# user, day, kind), the latest record's time, the number of tombstones and (for a session) its
# users. Kept by a view from every insert into the log, copies and tombstones too: a retried
# copy changes no maximum, a late record raises its own day's, and a tombstone is counted (not
# subtracted), which marks that key's latest time as an upper bound only. So the rollup never
# gives a total: it orders candidates by a time that is exact or too late, and each candidate
# is then summed exactly from its live records (see TraceStore._rolled_page).
ACTIVITY_ROLLUP = Table(
    name="activity_rollup",
    columns=(
        "project LowCardinality(String)",
        "key LowCardinality(String)",
        "value String",
        "day Date",
        "kind LowCardinality(String)",
        "last_at SimpleAggregateFunction(max, DateTime64(3, 'UTC'))",
        "tombstones SimpleAggregateFunction(sum, UInt64)",
        "user_ids SimpleAggregateFunction(groupUniqArrayArray, Array(String))",
    ),
    engine="AggregatingMergeTree",
    order_by="(project, key, day, value, kind)",
    sharded=True,
    sharding_key="cityHash64(project, value)",
)

ACTIVITY_ROLLUP_MV = View(
    name="activity_rollup_mv",
    to_table=ACTIVITY_ROLLUP.name,
    select=(
        "SELECT project, key, metadata_map[key] AS value, toDate(created_at) AS day, kind, "
        "max(created_at) AS last_at, toUInt64(sum(is_deleted)) AS tombstones, "
        "groupUniqArrayArrayIf([metadata_map['user_id']], "
        "key = 'session_id' AND metadata_map['user_id'] != '') AS user_ids "
        f"FROM {{db}}.{REQUESTS.name}{{local}} "
        "ARRAY JOIN ['session_id', 'user_id'] AS key "
        "WHERE metadata_map[key] != '' GROUP BY project, key, value, day, kind"
    ),
    sharded=True,
)


# The records of each trace, session and user, in the order their pages and sums read them:
# one row per (record, key) for the record's trace (key 'trace_id'), its session ('session_id')
# and its user ('user_id'). A trace's or a session's row carries what a list item shows; a
# user's, which no page lists, only what the user list sums (its ``item`` and ``trace`` are
# empty). A page of a trace or a session is one primary-key range read here, where it was keys
# from an index and then those keys looked up in ``request_items`` (sorted by time, so each key
# a seek of its own); a session's or a user's sums over a period are one range read each,
# where a user's were its keys from the metadata index looked up in ``request_items``, granules
# all over the month. One table for the three keys, so an insert writes one part more, not
# three. Filled by a view over ``request_items`` (the list copy the log's view writes: its
# packed ``item`` is reused, not packed again; tokens and cost read from it once a record),
# copies and tombstones too (reads resolve them as pages do), and for the records stored
# before migration 23 by its backfill. Granules of 128 rows, as ``request_items``: a page of
# 100 decompresses one or two granules of each part holding it.
THREAD_ITEMS = Table(
    name="thread_items",
    columns=(
        # The metadata index's key and the filter columns it copies (its versions come last).
        *(
            c
            for c in REQUEST_METADATA.columns
            if c.split(" ", 1)[0] not in ("row_version", "is_deleted")
        ),
        "item String",
        "trace String",
        "cost_known Bool",
        "kind LowCardinality(String)",
        "trace_id String",
        "session_id String",
        "user_id String",
        "total_tokens UInt32",
        "estimated_cost_usd Float64",
        "row_version UInt8",
        "is_deleted UInt8",
    ),
    engine=REQUEST_ITEMS.engine,
    engine_args=REQUEST_ITEMS.engine_args,
    partition_by=REQUEST_ITEMS.partition_by,
    order_by="(project, key, value, created_at, id)",
    sharded=True,
    # As the log: a record's rows live on the record's shard.
    sharding_key=REQUEST_ITEMS.sharding_key,
    settings=REQUEST_ITEMS.settings,
)

THREAD_ITEMS_MV = View(
    name="thread_items_mv",
    to_table=THREAD_ITEMS.name,
    select=(
        "SELECT project, key, value, created_at, id, prompt_name, model, status, "
        "if(key = 'user_id', '', item) AS item, if(key = 'user_id', '', trace) AS trace, "
        "cost_known, kind, trace_id, session_id, user_id, total_tokens, estimated_cost_usd, "
        "row_version, is_deleted FROM ("
        "SELECT project, created_at, id, prompt_name, model, status, item, trace, cost_known, "
        "kind, trace_id, metadata_map['session_id'] AS session_id, "
        f"metadata_map['user_id'] AS user_id, JSONExtractUInt(item, {_TOKENS}) AS total_tokens, "
        f"JSONExtractFloat(item, {_COST}) AS estimated_cost_usd, row_version, is_deleted "
        f"FROM {{db}}.{REQUEST_ITEMS.name}{{local}}) "
        "ARRAY JOIN ['trace_id', 'session_id', 'user_id'] AS key, "
        "[trace_id, session_id, user_id] AS value WHERE value != ''"
    ),
    sharded=True,
)


@dataclass(frozen=True)
class TraceSummary:
    """What the trace list shows of a trace."""

    trace_id: str
    name: str
    started_at: datetime
    duration_ms: int
    records: int
    llm_calls: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float
    user_id: str
    session_id: str
    # The ids of its live records, for its scores (read with the sums, not shown).
    record_ids: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class TraceFilter:
    """Filters of the trace list (None: not filtered)."""

    start: datetime | None = None
    end: datetime | None = None
    user_id: str | None = None
    session_id: str | None = None
    name: str | None = None

    def matches(self, trace: TraceSummary) -> bool:
        """Whether a trace, as summed over all its records, passes the filter."""
        return (
            (self.user_id is None or trace.user_id == self.user_id)
            and (self.session_id is None or trace.session_id == self.session_id)
            and (self.name is None or trace.name == self.name)
            and (self.start is None or trace.started_at >= self.start)
            and (self.end is None or trace.started_at <= self.end)
        )


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


@dataclass(frozen=True)
class UserSummary:
    """What the user list shows of a user."""

    user_id: str
    first_at: datetime
    last_at: datetime
    records: int
    sessions: int
    errors: int
    total_tokens: int
    estimated_cost_usd: float


# A row of the session list (with its records' ids) or of the user list.
_Item = TypeVar("_Item")


class TraceStore:
    """Every query of traces, sessions and users."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        db = quote(database)
        self.traces_table = f"{db}.{quote(TRACE_RECORDS.name)}"
        self.items_table = f"{db}.{quote(REQUEST_ITEMS.name)}"
        self.metadata_table = f"{db}.{quote(REQUEST_METADATA.name)}"
        self.rollup_table = f"{db}.{quote(ACTIVITY_ROLLUP.name)}"
        self.threads_table = f"{db}.{quote(THREAD_ITEMS.name)}"

    # -- traces ----------------------------------------------------------------------------

    def summaries(self, project: str, trace_ids: Sequence[str]) -> dict[str, TraceSummary]:
        """Return the summary of each of these traces that has a live record, with the ids
        of its live records: one read where a page of traces, or of one trace's records,
        asked its sums and then its records' ids for its scores."""
        if not trace_ids:
            return {}
        rows = self._client.query(
            "SELECT trace_id, min(created_at) AS started, "
            "max(created_at + toIntervalMillisecond(latency_ms)) AS ended, "
            f"argMin(span_name, {_ROOT_FIRST}), count(), "
            f"countIf(kind IN {_MODEL_CALLS}), countIf(status = 'error'), "
            "sum(total_tokens), sum(estimated_cost_usd), "
            f"argMinIf(user_id, {_ROOT_FIRST}, user_id != ''), "
            f"argMinIf(session_id, {_ROOT_FIRST}, session_id != ''), groupArray(id) "
            f"FROM {self.traces_table} FINAL "
            "WHERE project = {project:String} AND trace_id IN {ids:Array(String)} "
            "GROUP BY trace_id",
            parameters={"project": project, "ids": list(trace_ids)},
        ).result_rows
        found = {}
        for row in rows:
            started, ended = utc(row[1]), utc(row[2])
            found[str(row[0])] = TraceSummary(
                trace_id=str(row[0]),
                name=str(row[3]),
                started_at=started,
                duration_ms=max(0, round((ended - started).total_seconds() * 1000)),
                records=int(row[4]),
                llm_calls=int(row[5]),
                errors=int(row[6]),
                total_tokens=int(row[7]),
                estimated_cost_usd=float(row[8]),
                user_id=str(row[9]),
                session_id=str(row[10]),
                record_ids=tuple(str(i) for i in row[11]),
            )
        return found

    def trace_page(
        self,
        project: str,
        filters: TraceFilter,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TraceSummary]:
        """Return traces newest first (by their first record), after a keyset position.

        Candidates come from ``request_items`` a window of time at a time (see
        :func:`.request_filters.windows`), each with its start as far as the window sees it:
        a trace whose records all lie in the window has its true start there, one that began
        below the window looks newer than it is. Each candidate is then summed over all its
        records (``trace_records``): one that began below the window is left for the window
        that holds its start, and the filters are checked on the whole trace.
        """
        if filters.user_id is not None or filters.session_id is not None:
            return self._indexed_trace_page(project, filters, after, limit)
        found: list[TraceSummary] = []
        position = after
        fetch = limit + SLACK
        lowers = windows(RequestFilter(start=filters.start, end=filters.end), after)
        while len(found) < limit:
            lower = lowers[0] if lowers[0] is not None else filters.start
            candidates = self._trace_candidates(project, filters, position, fetch, lower)
            summaries = self.summaries(project, [trace_id for _, trace_id in candidates])
            for started, trace_id in candidates:
                summary = summaries.get(trace_id)
                if summary is None or (lower is not None and summary.started_at < lower):
                    continue  # gone, or begun below the window: the next window has it
                if summary.started_at != started or not filters.matches(summary):
                    continue
                found.append(summary)
            if candidates:
                position = candidates[-1]
            if len(candidates) < fetch:
                if lowers[0] is None:
                    break
                lowers = lowers[1:]
        return found[:limit]

    def _indexed_trace_page(
        self,
        project: str,
        filters: TraceFilter,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TraceSummary]:
        """Return the traces of one user or session, newest first, after a keyset position.

        The user's (or session's) records come from the metadata index newest first, a
        thousand at a time, instead of windows of every trace; their traces are summed whole
        (``trace_records``) and filtered as the window path does. A trace not yet seen has
        all of the user's records, and so its start, at or below the oldest record read: a
        summed trace that started after that is placed.
        """
        key, value = (
            ("user_id", filters.user_id)
            if filters.user_id is not None
            else ("session_id", str(filters.session_id))
        )
        params: dict[str, Any] = {"project": project, "key": key, "value": value}
        where = ["project = {project:String}", "key = {key:String}", "value = {value:String}"]
        if filters.start is not None:
            # A trace's records all come at or after its start.
            where.append("created_at >= {start:DateTime64(3, 'UTC')}")
            params["start"] = filters.start
        pending: list[TraceSummary] = []
        seen: set[str] = set()
        position: tuple[datetime, str] | None = None
        fetch = 1000
        while True:
            clause = list(where)
            if position is not None:
                clause.append("(created_at, id) < ({at:DateTime64(3, 'UTC')}, {id:String})")
                params.update(at=position[0], id=position[1])
            rows = self._client.query(
                f"SELECT created_at, id FROM {self.metadata_table} "
                f"WHERE {' AND '.join(clause)} "
                "ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
                parameters={**params, "limit": fetch},
                settings=PAGE_READ,
            ).result_rows
            keys = [(utc(r[0]), str(r[1])) for r in rows]
            new = [t for t in self._trace_ids_of(project, keys) if t not in seen]
            seen.update(new)
            pending += [
                s
                for s in self.summaries(project, new).values()
                if filters.matches(s) and (after is None or (s.started_at, s.trace_id) < after)
            ]
            pending.sort(key=lambda s: (s.started_at, s.trace_id), reverse=True)
            if len(rows) < fetch:
                return pending[:limit]
            position = keys[-1]
            ready = [s for s in pending if s.started_at > position[0]]
            if len(ready) >= limit:
                return ready[:limit]

    def _trace_ids_of(self, project: str, keys: list[tuple[datetime, str]]) -> list[str]:
        """Return the trace ids of the records at these keys (those in a trace)."""
        if not keys:
            return []
        rows = self._client.query(
            f"SELECT DISTINCT trace_id FROM {self.items_table} "
            "WHERE project = {project:String} AND trace_id != '' "
            "AND (created_at, id) IN {keys:Array(Tuple(DateTime64(3, 'UTC'), String))}",
            parameters={"project": project, "keys": keys},
        ).result_rows
        return [str(r[0]) for r in rows]

    def _trace_candidates(
        self,
        project: str,
        filters: TraceFilter,
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None,
    ) -> list[tuple[datetime, str]]:
        """Return (start as the window sees it, trace id) of traces newest first."""
        where = ["project = {project:String}", "trace_id != ''"]
        having: list[str] = []
        params: dict[str, Any] = {"project": project, "limit": limit}
        if lower is not None:
            where.append("created_at >= {lower:DateTime64(3, 'UTC')}")
            params["lower"] = lower
        if filters.end is not None:
            where.append("created_at <= {end:DateTime64(3, 'UTC')}")
            params["end"] = filters.end
        if after is not None:
            having.append(
                "(started, trace_id) < ({after_at:DateTime64(3, 'UTC')}, {after_id:String})"
            )
            params.update(after_at=after[0], after_id=after[1])
        # The filters narrow the candidates as the window sees each trace; the summary over
        # the whole trace decides (TraceFilter.matches).
        for name, value in (("user_id", filters.user_id), ("session_id", filters.session_id)):
            if value is not None:
                having.append(f"has(groupUniqArray(metadata_map['{name}']), {{{name}:String}})")
                params[name] = value
        if filters.name is not None:
            having.append("has(groupUniqArray(JSONExtractString(trace, 4)), {name:String})")
            params["name"] = filters.name
        rows = self._client.query(
            f"SELECT min(created_at) AS started, trace_id FROM {self.items_table} "
            f"WHERE {' AND '.join(where)} GROUP BY trace_id "
            + (f"HAVING {' AND '.join(having)} " if having else "")
            + "ORDER BY started DESC, trace_id DESC LIMIT {limit:UInt32}",
            parameters=params,
        ).result_rows
        return [(utc(r[0]), str(r[1])) for r in rows]

    def trace(
        self, project: str, trace_id: str, after: tuple[datetime, str] | None, limit: int
    ) -> tuple[TraceSummary | None, list[RequestRow]]:
        """Return a trace's summary (None if it has no live record) and its live records
        oldest first, after a keyset position.

        A first page that reads the whole trace (its read was not cut by its limit) is the
        summary too, summed here from the rows read: one query where the summary was a second
        (:meth:`summaries`, which a later page or a bigger trace still asks).
        """
        rows, whole = self._thread_page(project, "trace_id", trace_id, after, limit, None)
        if whole:
            return _trace_summary(trace_id, whole), rows
        # A later page, a trace bigger than its first read, or none of its rows read: the
        # summary apart (``trace_records`` is the trace's record of its records, whatever
        # ``thread_items`` holds yet).
        return self.summaries(project, [trace_id]).get(trace_id), rows

    # -- sessions --------------------------------------------------------------------------

    def session_page(
        self,
        project: str,
        period: tuple[datetime, datetime],
        kinds: Sequence[str] | None,
        user_id: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[tuple[SessionSummary, list[tuple[str, str]]]]:
        """Return sessions of the period, latest activity first, after a keyset position,
        each with (record id, trace id) of its live records of every kind in the period (for
        its scores)."""

        def exact(values: list[str]) -> list[tuple[SessionSummary, list[tuple[str, str]]]]:
            return self._sessions(project, values, period, kinds, user_id)

        return self._rolled_page(
            project,
            "session_id",
            (period, kinds, user_id),
            after,
            limit,
            exact,
            lambda s: (s[0].last_at, s[0].session_id),
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

        One range read of the session's rows of ``thread_items`` with their list columns,
        summed here: the rows come in key order, so a record's copies are adjacent and resolve
        as a page's do; summing them here costs less than ClickHouse grouping them twice
        (records, then the session), the session's rows being few. A session of up to
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
            user_ids=sorted({str(r[8]) for r in picked if r[8]}),
            first_at=utc(picked[0][1]),
            last_at=utc(picked[-1][1]),
            records=len(picked),
            errors=sum(1 for r in picked if r[9] == "error"),
            total_tokens=sum(int(r[11]) for r in picked),
            estimated_cost_usd=sum(float(r[12]) for r in picked),
        )
        records = [(str(r[0]), str(r[10])) for r in live]
        if not whole:
            page, _ = self._thread_page(project, "session_id", session_id, after, limit, kinds)
            return summary, records, page
        if after is not None:
            picked = [r for r in picked if (utc(r[1]), str(r[0])) > after]
        return summary, records, [item_row(r) for r in picked[:limit]]

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

    # -- users -----------------------------------------------------------------------------

    def user_page(
        self,
        project: str,
        period: tuple[datetime, datetime],
        kinds: Sequence[str] | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[UserSummary]:
        """Return users of the period, latest activity first, after a keyset position."""

        def exact(values: list[str]) -> list[UserSummary]:
            rows = self._sums(
                project,
                "user_id",
                values,
                (period, kinds),
                "min(created_at), max(created_at) AS last_at, count(), "
                "uniqExactIf(session_id, session_id != ''), countIf(status = 'error'), "
                "sum(total_tokens), sum(estimated_cost_usd)",
                "",
                {},
            )
            return [
                UserSummary(
                    user_id=str(r[0]),
                    first_at=utc(r[1]),
                    last_at=utc(r[2]),
                    records=int(r[3]),
                    sessions=int(r[4]),
                    errors=int(r[5]),
                    total_tokens=int(r[6]),
                    estimated_cost_usd=float(r[7]),
                )
                for r in rows
            ]

        return self._rolled_page(
            project,
            "user_id",
            (period, kinds, None),
            after,
            limit,
            exact,
            lambda u: (u.last_at, u.user_id),
        )

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
    ) -> list[_Item]:
        """Return a page of sessions or users, latest activity first, after ``after``.

        The rollup gives candidates in the order of a latest time that is exact or too late
        (never too early: deletes only lower it, and the period's end clips it); each is then
        summed exactly (``exact``) over its live records of the period. A summed candidate is
        placed once it is no older than the last candidate read: every candidate not yet read
        is older than that. Candidates above ``after`` whose time is exact belonged to earlier
        pages and are not read again; only those with tombstones (or records past the period)
        are, so a deep page reads little more than a first one.
        """
        pending: list[_Item] = []
        cursor: tuple[datetime, str] | None = None
        fetch = limit + SLACK
        (start, end), _, _ = scope
        # The rollup's days a read covers, a window at a time (a day, then 8, then the whole
        # period: see request_filters.windows). A key's latest time lies on its newest day, so
        # every key with a day in a window is later than every key without one: a window's
        # candidates, latest first, are the period's, and a read that does not fill its fetch
        # goes on below them in the next window.
        # Not for a user's sessions: the rollup's users of a session are tested over the days
        # read, and a session's user may have records only on older days.
        lowers = windows(RequestFilter(start=start, end=end), after) if scope[2] is None else [None]
        while True:
            candidates = self._candidates(project, key, scope, cursor, after, fetch, lowers[0])
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
            "sum(tombstones) > 0 OR max(last_at) > {end:DateTime64(3, 'UTC')} AS inexact "
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
    ) -> list[tuple[Any, ...]]:
        """Group the live records of ``kinds`` in the period of these sessions or users
        (``key``) by session or user: ``SELECT value, <select>``, latest activity first. With
        ``every_kind`` the records of every kind are grouped, ``picked`` telling those of
        ``kinds``.

        A primary-key read of each one's rows of ``thread_items`` with FINAL, which resolves
        each record's copies and tombstone over those rows only (one row per record, none if
        a copy is a tombstone: the tombstone's version is the higher), as pages do. It was a
        ``GROUP BY`` per record under the ``GROUP BY`` per key: 1.5x the time.
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
        return [
            tuple(r)
            for r in self._client.query(
                f"WITH {picked} AS picked SELECT value, {select} "
                f"FROM {self.threads_table} FINAL WHERE {' AND '.join(where)} "
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
            rows = [
                tuple(r)
                for r in self._client.query(
                    f"SELECT {LIST_COLUMNS}, {sums}is_deleted FROM {self.threads_table} "
                    f"WHERE {clause} ORDER BY created_at, id LIMIT {{limit:UInt32}}",
                    parameters={**params, "limit": fetch},
                    settings=PAGE_READ,
                ).result_rows
            ]
            runs, complete = whole_copies(rows, fetch)
            if not runs and not complete:
                fetch *= 2  # one key holds a whole fetch of copies: read more at once
                continue
            live = [run[0] for run in runs if not any(r[-1] for r in run)]
            records = [item_row(r) for r in live]
            if sums and complete:  # the trace's first read, all of it
                whole = [(row, str(r[8]), str(r[9])) for row, r in zip(records, live, strict=True)]
            sums = ""
            found += records
            if runs:
                last = runs[-1][0]
                position = (utc(last[1]), str(last[0]))
            if complete:
                break
        return found[:limit], whole


def _trace_summary(trace_id: str, live: list[tuple[RequestRow, str, str]]) -> TraceSummary:
    """Sum a trace from all its live records (at least one), oldest first, each with its user
    and session ids, as :meth:`TraceStore.summaries` does in ClickHouse."""
    started = live[0][0].created_at
    ended = max(r.created_at + timedelta(milliseconds=r.latency_ms) for r, _, _ in live)
    # The root (no parent) first, then the oldest; a stable sort keeps equals in key order.
    root_first = sorted(live, key=lambda r: (r[0].parent_span_id != "", r[0].created_at))
    return TraceSummary(
        trace_id=trace_id,
        name=root_first[0][0].span_name,
        started_at=started,
        duration_ms=max(0, round((ended - started).total_seconds() * 1000)),
        records=len(live),
        llm_calls=sum(1 for r, _, _ in live if r.kind in _MODEL_CALL_KINDS),
        errors=sum(1 for r, _, _ in live if r.status == "error"),
        total_tokens=sum(r.total_tokens for r, _, _ in live),
        estimated_cost_usd=sum(r.estimated_cost_usd for r, _, _ in live),
        user_id=next((user for _, user, _ in root_first if user), ""),
        session_id=next((session for _, _, session in root_first if session), ""),
        record_ids=tuple(r.id for r, _, _ in live),
    )


def _period(period: tuple[datetime, datetime], params: dict[str, Any]) -> str:
    """Return the condition of records created in ``period`` (``params`` get its bounds)."""
    params.update(start=period[0], end=period[1])
    return "created_at >= {start:DateTime64(3, 'UTC')} AND created_at <= {end:DateTime64(3, 'UTC')}"
