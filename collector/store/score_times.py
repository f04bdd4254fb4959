"""The record times score sums are keyed by (SCORE_SUMS_BY_TIME, migration 42).

Each score version carries the ``record_at`` it was summed under: its record's
``created_at`` as ``request_ids`` said when the version was written, or :data:`PENDING` when
the record was not stored yet (and for a trace's or a session's score, which has no single
record). A tombstone must land under its version's key, so the score store asks
:meth:`RecordTimes.summed_at` for the key of each live version it ends, and moves the
pending scores whose records have landed since with :meth:`RecordTimes.pending_landed`
(see collector/store/DESIGN.md, "Scores").

A version stored before migration 42 reads ``record_at`` as PENDING whatever its record:
the migration summed it under its record's time when the record was stored then, else
under PENDING. Which one is decidable later: a record stored at the migration has had every
score since summed under its time, so its PENDING key holds nothing of the name; a record
stored after it has the version's own +1 there until the version is moved. So a version
that reads PENDING is summed under PENDING exactly when its (name, record) has a positive
pending sum, else under its record's time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .score_rows import ScoreRow

# The key of a sum whose record is not stored (yet), or that is no record's.
PENDING = datetime(1970, 1, 1, tzinfo=UTC)


def on_record(row: ScoreRow) -> bool:
    """Whether the score is a record's (summed with ``on_trace`` 0, under a record time)."""
    return bool(row.request_id) and not row.trace_id and not row.session_id


class RecordTimes:
    """Reads ``request_ids`` and the pending run of SCORE_SUMS_BY_TIME for the score store."""

    def __init__(
        self,
        client: Client,
        ids_table: str,
        sums_table: str,
        settings: dict[str, Any],
        sole_writer: bool = False,
    ) -> None:
        """``ids_table``, ``sums_table``: the quoted ``request_ids`` and sums by time;
        ``sole_writer``: every score write of the store goes through this process."""
        self._client = client
        self._ids = ids_table
        self._sums = sums_table
        self._settings = settings
        self._sole_writer = sole_writer
        # Sole writer: the names seen with no pending sum, per project. Only a score write
        # of this process adds one (wrote_pending), so their pending run need not be read
        # after every write (~15 ms of a 1,000-score batch at 300k scores).
        self._empty: dict[str, set[str]] = {}

    def wrote_pending(self, project: str, names: Iterable[str]) -> None:
        """Learn that ``names`` got versions summed under PENDING (under the write lock)."""
        self._empty.get(project, set()).difference_update(names)

    def of_records(self, project: str, request_ids: Iterable[str]) -> dict[str, datetime]:
        """The stored records' times among ``request_ids`` (one key lookup each)."""
        ids = sorted({r for r in request_ids if r})
        if not ids:
            return {}
        rows = self._client.query(
            f"SELECT id, min(created_at) FROM {self._ids} WHERE project = {{p:String}} "
            "AND id IN {ids:Array(String)} GROUP BY id",
            parameters={"p": project, "ids": ids},
            settings=self._settings,
        ).result_rows
        return {str(r[0]): _utc(r[1]) for r in rows}

    def for_new(self, rows: Iterable[ScoreRow]) -> dict[tuple[str, str], datetime]:
        """The key each new version is summed under, by (project, request id): its record's
        time when the record is stored; a record's score missing here is PENDING."""
        by_project: dict[str, set[str]] = {}
        for r in rows:
            if on_record(r):
                by_project.setdefault(r.project, set()).add(r.request_id or "")
        found: dict[tuple[str, str], datetime] = {}
        for project, ids in by_project.items():
            for rid, at in self.of_records(project, ids).items():
                found[(project, rid)] = at
        return found

    def pending(
        self, project: str, names: Iterable[str], targets: Iterable[str] | None = None
    ) -> set[tuple[str, str]]:
        """The (name, record id) with a positive sum under PENDING, of ``names`` (of
        ``targets`` only, when given): one key range per name."""
        wanted = sorted(
            set(names) - (self._empty.get(project, set()) if targets is None else set())
        )
        if not wanted:
            return set()
        of = ""
        params: dict[str, Any] = {"p": project, "names": wanted, "pending": PENDING}
        if targets is not None:
            params["targets"] = sorted(set(targets))
            if not params["targets"]:
                return set()
            of = " AND target IN {targets:Array(String)}"
        rows = self._client.query(
            f"SELECT name, target FROM {self._sums} WHERE project = {{p:String}} "
            "AND name IN {names:Array(String)} AND on_trace = 0 "
            f"AND record_at = {{pending:DateTime64(3, 'UTC')}}{of} "
            "GROUP BY name, target HAVING sum(scores) > 0",
            parameters=params,
            settings=self._settings,
        ).result_rows
        found = {(str(r[0]), str(r[1])) for r in rows}
        if targets is None and self._sole_writer:
            self._empty.setdefault(project, set()).update(set(wanted) - {n for n, _ in found})
        return found

    def summed_at(
        self, versions: Sequence[tuple[ScoreRow, datetime]]
    ) -> list[tuple[ScoreRow, datetime]]:
        """Each live version with the key it is summed under (see the module's docstring):
        its own ``record_at``, unless that reads PENDING on a record's score, which a
        version stored before migration 42 does whatever its key."""
        unsure: dict[str, list[ScoreRow]] = {}
        for row, at in versions:
            if at == PENDING and on_record(row):
                unsure.setdefault(row.project, []).append(row)
        timed: dict[tuple[str, str], datetime] = {}
        for project, rows in unsure.items():
            pending = self.pending(
                project, {r.name for r in rows}, {r.request_id or "" for r in rows}
            )
            rest = [r.request_id or "" for r in rows if (r.name, r.request_id) not in pending]
            for rid, at in self.of_records(project, rest).items():
                timed[(project, rid)] = at
        return [
            (row, timed.get((row.project, row.request_id or ""), at) if at == PENDING else at)
            for row, at in versions
        ]


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
