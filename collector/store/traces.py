"""Traces (docs/api-notes.md, "Traces, sessions and users"), read from the request log's
tables, and :class:`TraceStore`, the store of traces, sessions and users.

- A trace's summary is a primary-key read of ``trace_records`` (one row per record of a
  trace, sorted by trace), resolved with FINAL over those rows only; its pages are
  primary-key range reads of ``thread_items`` (the records of each trace, session and user,
  sorted by it), copies and tombstones resolved as list pages do.
- The trace list finds the newest traces in ``request_items`` (sorted by time) a window of
  records at a time, then sums each candidate in ``trace_records``.

Sessions (:mod:`.sessions`) and users (:mod:`.users`) are modules of their own, on the reads
all three share (:mod:`.threads`); :class:`TraceStore` joins them for the trace service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .connection import utc
from .request_filters import PAGE_READ, RESERVED_PREFIX, SLACK
from .request_rows import RequestRow
from .sessions import SessionReads
from .threads import ThreadReads
from .users import UserReads

# The kinds counted as model calls.
_MODEL_CALL_KINDS = ("llm", "embedding")
_MODEL_CALLS = str(_MODEL_CALL_KINDS)
# A trace's name, user and session are its root record's (no parent), else its first
# record's that has one: argMin over this key prefers the root, then the oldest.
_ROOT_FIRST = "(parent_span_id != '', created_at)"
# How many records below its anchor (the cursor, the filter's end, else the newest record) the
# trace list's first window holds, and how many times more each next one does, up to the last
# bounded one: then the rest. Candidates are grouped by trace over the whole window, so its
# cost is its records'; windows of time (a day first) grouped ~3M records at 100M (~230 ms of
# CPU a page) and a few hundred at 1M, where windows of records read ~2,000 whatever the size
# of the log (~20 ms at 100M, probe included). 2,000 records hold the 28 traces a page fetches
# at up to ~70 records a trace; a rarer name, or longer traces, widen it.
_FIRST_REACH = 2_000
_WIDER = 8
_LAST_REACH = 1_000_000


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
    # The environments of its records, for the list's filter (not shown).
    environments: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class TraceFilter:
    """Filters of the trace list (None: not filtered)."""

    start: datetime | None = None
    end: datetime | None = None
    user_id: str | None = None
    session_id: str | None = None
    name: str | None = None
    # As a request filter's (docs/api-notes.md, Environments): a trace is kept when any of
    # its records is of a kept environment.
    environments: tuple[str, ...] | None = None
    public_only: bool = False

    def matches(self, trace: TraceSummary) -> bool:
        """Whether a trace, as summed over all its records, passes the filter."""
        return (
            self._environments_match(trace)
            and (self.user_id is None or trace.user_id == self.user_id)
            and (self.session_id is None or trace.session_id == self.session_id)
            and (self.name is None or trace.name == self.name)
            and (self.start is None or trace.started_at >= self.start)
            and (self.end is None or trace.started_at <= self.end)
        )

    def _environments_match(self, trace: TraceSummary) -> bool:
        kept = trace.environments
        if self.environments is not None:
            kept = tuple(e for e in kept if e in self.environments)
        if self.public_only:
            kept = tuple(e for e in kept if not e.startswith(RESERVED_PREFIX))
        return bool(kept)


class TraceReads(ThreadReads):
    """The reads of traces: their summaries, the trace list and one trace's records."""

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
            f"argMinIf(session_id, {_ROOT_FIRST}, session_id != ''), groupArray(id), "
            "groupUniqArray(environment) "
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
                environments=tuple(str(e) for e in row[12]),
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

        Candidates come from ``request_items`` a window at a time: the newest ``reach``
        records below the page's position (:meth:`_window_lower`), ``reach`` growing when a
        window cannot fill the page. Each candidate has its start as far as the window sees
        it: a trace whose records all lie in the window has its true start there, one that
        began below the window looks newer than it is. Each candidate is then summed over all
        its records (``trace_records``): one that began below the window is left for the
        window that holds its start, and the filters are checked on the whole trace.
        """
        if filters.user_id is not None or filters.session_id is not None:
            return self._indexed_trace_page(project, filters, after, limit)
        found: list[TraceSummary] = []
        position = after
        fetch = limit + SLACK
        reach: int | None = _FIRST_REACH
        while len(found) < limit:
            anchor = position[0] if position is not None else filters.end
            if filters.end is not None and anchor is not None:
                anchor = min(anchor, filters.end)
            lower = None if reach is None else self._window_lower(project, anchor, reach)
            if lower is None or (filters.start is not None and lower <= filters.start):
                # Fewer records than that below the anchor (or none past the start): this
                # window is the rest of the period.
                lower, reach = filters.start, None
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
                if reach is None:
                    break
                reach = reach * _WIDER if reach < _LAST_REACH else None
        return found[:limit]

    def _window_lower(self, project: str, anchor: datetime | None, reach: int) -> datetime | None:
        """Return the time of the ``reach``-th newest record at or below ``anchor`` (None:
        the newest), of any kind, in a trace or not; None if there are fewer.

        Read newest first in key order, as a list page is: ``reach`` rows of the sort key
        (and of the newest part or two), not a window of time's.
        """
        params: dict[str, Any] = {"project": project, "reach": reach}
        where = "project = {project:String}"
        if anchor is not None:
            where += " AND created_at <= {anchor:DateTime64(3, 'UTC')}"
            params["anchor"] = anchor
        rows = self._client.query(
            f"SELECT created_at FROM {self.items_table} WHERE {where} "
            "ORDER BY created_at DESC LIMIT 1 OFFSET {reach:UInt32}",
            parameters=params,
            settings=PAGE_READ,
        ).result_rows
        return utc(rows[0][0]) if rows else None

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


class TraceStore(TraceReads, SessionReads, UserReads):
    """Every query of traces, sessions and users."""


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
        environments=tuple(dict.fromkeys(r.environment for r, _, _ in live)),
    )
