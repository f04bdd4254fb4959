"""The score store: the writes and reads of scores and score configs (docs/api-notes.md,
"Scores and feedback"). The tables are in :mod:`.score_tables`, the rows in :mod:`.score_rows`,
and the score SQL the request log's stores borrow in :mod:`.score_sql`.

A score is only ever inserted: a repeat of its id is a newer row (``written_at``), a delete a
newer row with ``is_deleted = 1``. The table is sorted by ``(project, id)``, so every version
of one score shares a key. A read never trusts a row's target (``request_id``, ``trace_id``
or ``session_id``) before resolving its id: it finds the candidate ids (any version that ever
pointed at the target, through a bloom filter), then takes each id's newest version by key and
filters on *that*. A replacement that moved a score to another record or name therefore never
leaves the old one visible, before or after a merge (see collector/store/DESIGN.md, "Scores").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from .request_tables import REQUEST_IDS, REQUEST_ITEMS, TRACE_RECORDS
from .schema import quote
from .score_configs import ScoreConfigs
from .score_rows import ScoreConfigRow, ScoreQuery, ScoreRow, ScoreValue, as_utc, score_row
from .score_sql import (
    VALUE_VERSION_COLUMNS,
    VERSION_COLUMNS,
    live_at_targets,
    live_on_targets,
    read_traced_names,
    score_versions,
)
from .score_tables import (
    FIELD_REF,
    READ_FIELDS,
    SCORE_CONFIGS,
    SCORE_FIELDS,
    SCORE_SPAN_NAMES,
    SCORE_SUMS_BY_TIME,
    SCORES,
    SCORES_BY_TARGET,
    session_target,
)
from .score_times import PENDING, RecordTimes, on_record
from .traced_score_names import TracedScoreNames
from .writes.direct import direct_write
from .writes.outcomes import WriteOutcome

# The most records whose pending sums one write moves (ScoreStore._move_landed).
_MOVED_AT_ONCE = 500


class ScoreStore:
    """Reads and writes ``scores`` and ``score_configs``."""

    def __init__(
        self,
        client: Client,
        database: str,
        cluster: str | None = None,
        sole_writer: bool = False,
    ) -> None:
        """``sole_writer``: every score write of the store goes through this process (the
        embedded store), so what :attr:`traced_names` learns stays true."""
        self._client = client
        db = quote(database)
        self.table = f"{db}.{quote(SCORES.name)}"
        self.traced_names = TracedScoreNames(
            lambda project, names: read_traced_names(client, self.table, project, names),
            sole_writer,
        )
        self._sole_writer = sole_writer
        # Names this process saw stored in SCORE_SPAN_NAMES, per project.
        self._span_named: dict[str, set[str]] = {}
        self._span_names = f"{db}.{quote(SCORE_SPAN_NAMES.name)}"
        self._items = f"{db}.{quote(REQUEST_ITEMS.name)}"
        self._trace_records = f"{db}.{quote(TRACE_RECORDS.name)}"
        self._traced_projects: set[str] = set()  # projects seen with a record in a trace
        self._ids = f"{db}.{quote(REQUEST_IDS.name)}"
        self._by_target = f"{db}.{quote(SCORES_BY_TARGET.name)}"
        self._columns = ["project", "id", *SCORE_FIELDS, "written_at"]
        self._types = SCORES.column_types(self._columns)
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read_settings: dict[str, Any] = (
            {"select_sequential_consistency": 1} if cluster else {}
        )
        self._write_lock = threading.Lock()
        self._config_store = ScoreConfigs(
            client, f"{db}.{quote(SCORE_CONFIGS.name)}", self._write_settings, self._read_settings
        )
        sums = f"{db}.{quote(SCORE_SUMS_BY_TIME.name)}"
        self._times = RecordTimes(client, self._ids, sums, self._read_settings, sole_writer)

    # -- writes ----------------------------------------------------------------------------

    def insert(self, rows: Sequence[ScoreRow], deleted: bool = False) -> WriteOutcome:
        """Store scores (each a new version of its id); ``deleted`` stores tombstones.

        Answers :data:`STORED`, or :class:`Refused` when the store cannot take them now (an
        outage: the caller answers its 503); a failure that is no outage (a bug) is raised.
        A retry of a refused write is safe: it stores each id's version anew.

        A repeated id within ``rows`` keeps its last row. Each id's live version, if any, is
        read first and ended in the same insert block: a replacement is preceded by a
        tombstone of the version it replaces (a microsecond older, so the new one stands),
        and a delete is a tombstone of the live version as it is now (nothing for an id no
        longer live). The sums view (SCORE_SUMS) subtracts exactly what each tombstone
        ends. The lock makes read-then-insert atomic among this process's writers, so two
        concurrent writes of one id never end the same version twice.
        """
        return direct_write(lambda: self._insert(rows, deleted))

    def insert_at_own_targets(self, rows: Sequence[ScoreRow]) -> WriteOutcome:
        """Store scores whose ids the collector derives from their targets (the evaluation
        worker's: one id per rule and target, only ever written at that target), as
        :meth:`insert` does, reading fewer live versions.

        Such a score is new but when its target was decided again (a backfill, a batch
        decided again after a crash or a failed write). The ids that ever had a version at
        these targets are read first from SCORES_BY_TARGET (a key range per target, where
        :meth:`insert` reads every id from ``scores``, whose key scatters them over its
        granules); only theirs are read as :meth:`insert` reads them, so a replacement
        is still preceded by a tombstone and the sums stay exact.
        """
        return direct_write(lambda: self._insert(rows, False, at_own_targets=True))

    def _insert(
        self, rows: Sequence[ScoreRow], deleted: bool, at_own_targets: bool = False
    ) -> None:
        latest = {(r.project, r.id): r for r in rows}
        if not latest:
            return
        times: dict[tuple[str, str], datetime] = {}
        if not deleted:
            # Each new version is summed under its record's time, when the record is stored.
            times = self._times.for_new(latest.values())
            self._note_traced(list(latest.values()), times)
        with self._write_lock:
            keys = self._ever_at_targets(latest.values()) if at_own_targets else latest
            live = self._live_versions(keys) if keys else {}
            # A tombstone lands under the key its version was summed under.
            ending = self._times.summed_at(list(live.values()))
            written = datetime.now(UTC)
            ended = written - timedelta(microseconds=1)
            if deleted:
                block = [_version_values(r, True, written, at) for r, at in ending]
            else:
                block = [_version_values(r, True, ended, at) for r, at in ending]
                block += [
                    _version_values(r, False, written, times.get((r.project, r.request_id or "")))
                    for r in latest.values()
                ]
            if block:
                self._write(block)
            if not deleted:
                early = [r for r in latest.values() if (r.project, r.request_id) not in times]
                for project, names in _record_names(early).items():
                    self._times.wrote_pending(project, names)
                for project, names in _record_names(latest.values()).items():
                    self._move_landed(project, names)

    def _write(self, block: list[list[Any]]) -> None:
        self._client.insert(
            self.table,
            block,
            column_names=self._columns,
            column_type_names=self._types,
            settings=self._write_settings,
        )

    def _move_landed(self, project: str, names: set[str]) -> None:
        """Move the pending sums of ``names`` whose records are stored now to the records'
        times: each live version summed under PENDING is ended there by a tombstone and
        written again, unchanged but for its ``record_at`` (under the write lock, so no
        write ends it in between). A record's pending sums are read beside its window's
        until then (score_sql.score_clauses), so this keeps the pending run short, not the
        filters exact."""
        pending = self._times.pending(project, names)
        if not pending:
            return
        # At most _MOVED_AT_ONCE records a write: a backlog (scores an older collector wrote
        # to this store) moves over the writes that follow, none paying for all of it.
        targets = sorted({target for _, target in pending})[:_MOVED_AT_ONCE]
        landed = self._times.of_records(project, targets)
        if not landed:
            return
        ids = self._client.query(
            f"SELECT DISTINCT id FROM {self._by_target} WHERE project = {{p:String}} "
            "AND target IN {targets:Array(String)}",
            parameters={"p": project, "targets": sorted(landed)},
            settings=self._read_settings,
        ).result_rows
        live = self._live_versions({(project, str(row[0])) for row in ids})
        moved = [
            r
            for r, at in live.values()
            if at == PENDING and on_record(r) and (r.name, r.request_id) in pending
        ]
        if not moved:
            return
        # A moved score leaves the PENDING run, where a reader found that it may be a span's.
        spans = self._spans_among(
            project, {(landed[r.request_id or ""], r.request_id or "") for r in moved}
        )
        self._name_spans(project, {r.name for r in moved if r.request_id in spans})
        written = datetime.now(UTC)
        ended = written - timedelta(microseconds=1)
        block = [_version_values(r, True, ended, PENDING) for r in moved]
        block += [_version_values(r, False, written, landed[r.request_id or ""]) for r in moved]
        self._write(block)

    def _note_traced(
        self, rows: Sequence[ScoreRow], times: dict[tuple[str, str], datetime]
    ) -> None:
        """Tell :attr:`traced_names` of the names these scores give a trace: a trace's, one
        on a stored span record (a record that is no model call and has a trace, whose
        scores count for the trace: score_sql.span_records), which is also stored in
        SCORE_SPAN_NAMES for every reader of the store, and, in the store's one writer, one
        on a record not stored yet, which may be a span (a reader of the store finds it in
        the PENDING run). Called before the scores' insert. ``times``: the stored records'
        times, by (project, id) (RecordTimes.for_new)."""
        for r in rows:
            if r.trace_id:
                self.traced_names.note(r.project, {r.name})
        by_project: dict[str, list[ScoreRow]] = {}
        for r in rows:
            # A name stored as a span's once needs no look at its records again.
            if on_record(r) and r.name not in self._span_named.get(r.project, ()):
                by_project.setdefault(r.project, []).append(r)
        for project, scored in by_project.items():
            stored = [r for r in scored if (project, r.request_id) in times]
            spans = self._spans_among(
                project,
                {(times[(project, r.request_id or "")], r.request_id or "") for r in stored},
            )
            self._name_spans(project, {r.name for r in stored if r.request_id in spans})
            if self._sole_writer:
                early = {r.name for r in scored if (project, r.request_id) not in times}
                self.traced_names.note(project, early)

    def _spans_among(self, project: str, records: set[tuple[datetime, str]]) -> set[str]:
        """Which of these stored records, (created_at, id), are span records: one key read
        of ``request_items``."""
        keys = sorted(records)
        if not keys or not self._has_traces(project):
            return set()
        return {
            str(row[0])
            for row in self._client.query(
                f"SELECT id FROM {self._items} WHERE project = {{p:String}} AND "
                "(created_at, id) IN {keys:Array(Tuple(DateTime64(3, 'UTC'), String))} "
                "AND kind NOT IN ('llm', 'embedding') AND trace_id != ''",
                parameters={"p": project, "keys": keys},
                settings=self._read_settings,
            ).result_rows
        }

    def _has_traces(self, project: str) -> bool:
        """Whether ``project`` has a stored record in a trace (a span record is one): the
        first row of its key range of ``trace_records``, ~1 ms where the kinds' lookup costs
        ~35 ms a batch. A yes stays known; a no is read again, a record of a trace may land
        any time (one the batch's record lookup found is here too: the insert of a record
        writes ``request_ids``, ``request_items`` and this table)."""
        if project in self._traced_projects:
            return True
        rows = self._client.query(
            f"SELECT 1 FROM {self._trace_records} WHERE project = {{p:String}} LIMIT 1",
            parameters={"p": project},
            settings=self._read_settings,
        ).result_rows
        if rows:
            self._traced_projects.add(project)
        return bool(rows)

    def _name_spans(self, project: str, names: set[str]) -> None:
        """Store ``names`` as scored on span records (SCORE_SPAN_NAMES) and tell
        :attr:`traced_names`, before a score on a span record is written."""
        fresh = sorted(names - self._span_named.get(project, set()))
        if not fresh:
            return
        self.traced_names.note(project, fresh)
        self._client.insert(
            self._span_names,
            [[project, name] for name in fresh],
            column_names=["project", "name"],
            settings=self._write_settings,
        )
        self._span_named.setdefault(project, set()).update(fresh)

    def _live_versions(
        self, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[ScoreRow, datetime]]:
        """The live version of each (project, id) of ``keys`` that has one, with the
        ``record_at`` it carries."""
        by_project: dict[str, list[str]] = {}
        for project, score_id in keys:
            by_project.setdefault(project, []).append(score_id)
        found: dict[tuple[str, str], tuple[ScoreRow, datetime]] = {}
        for project, ids in by_project.items():
            sql = self._resolved("id IN {ids:Array(String)}", "1", shown_too=("record_at",))
            result = self._client.query(
                sql, parameters={"p": project, "ids": ids}, settings=self._read_settings
            )
            for values in result.result_rows:
                row = score_row(project, values[:-1])
                found[(project, row.id)] = (row, as_utc(values[-1]))
        return found

    def _ever_at_targets(self, rows: Iterable[ScoreRow]) -> set[tuple[str, str]]:
        """The (project, id) of ``rows`` that ever had a version at the row's own target
        (SCORES_BY_TARGET keeps every version, tombstones too)."""
        by_project: dict[str, tuple[set[str], set[str]]] = {}
        for r in rows:
            targets, ids = by_project.setdefault(r.project, (set(), set()))
            targets.add(_target_of(r))
            ids.add(r.id)
        found: set[tuple[str, str]] = set()
        for project, (targets, ids) in by_project.items():
            result = self._client.query(
                f"SELECT DISTINCT id FROM {self._by_target} WHERE project = {{p:String}} "
                "AND target IN {targets:Array(String)} AND id IN {ids:Array(String)}",
                parameters={"p": project, "targets": sorted(targets), "ids": sorted(ids)},
                settings=self._read_settings,
            )
            found.update((project, str(row[0])) for row in result.result_rows)
        return found

    def delete_for_targets(
        self, project: str, request_ids: Sequence[str], trace_ids: Sequence[str] = ()
    ) -> tuple[int, WriteOutcome]:
        """Store a tombstone for every live score on these records (or traces): how many,
        and the write's outcome (:meth:`insert`)."""
        rows = self.for_targets(project, request_ids, trace_ids)
        return len(rows), self.insert(rows, deleted=True)

    # -- reads -----------------------------------------------------------------------------

    def _resolved(
        self, candidates: str, post: str, tail: str = "", shown_too: tuple[str, ...] = ()
    ) -> str:
        """The newest version of each candidate id, kept when alive and ``post`` holds.

        ``candidates`` narrows the ids before they are resolved (it may only ever widen what
        ``post`` then keeps); ``post`` filters the resolved fields, named ``s.<field>``;
        ``shown_too``: fields read after READ_FIELDS'.
        """
        fields = ", ".join(SCORE_FIELDS)
        shown = ", ".join(f"s.{f}" for f in (*READ_FIELDS, *shown_too))
        sql = (
            f"SELECT id, {shown} FROM ("
            f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {self.table} "
            f"WHERE project = {{p:String}} AND {candidates} GROUP BY id"
            f") WHERE s.is_deleted = 0 AND {post} {tail}"
        )
        # The tuple is positional: s.<field> names its element by place.
        return FIELD_REF.sub(lambda m: f"tupleElement(s, {SCORE_FIELDS.index(m[1]) + 1})", sql)

    def _ids_at(self, condition: str) -> str:
        """Ids of the project's scores a version of which is at a target meeting ``condition``
        (on ``target``: a record or a trace id), read from SCORES_BY_TARGET.

        Not from SCORE_TARGETS, whose view migration 26 drops: every read resolves an id's
        newest version and keeps it at its current target only, which SCORES_BY_TARGET holds
        (written by its view, and its seed for the scores stored before migration 22).
        """
        return (
            f"id IN (SELECT id FROM {self._by_target} WHERE project = {{p:String}} AND {condition})"
        )

    def _rows(self, project: str, sql: str, params: dict[str, Any]) -> list[ScoreRow]:
        result = self._client.query(
            sql, parameters={"p": project, **params}, settings=self._read_settings
        )
        return [score_row(project, row) for row in result.result_rows]

    def get(self, project: str, score_id: str) -> ScoreRow | None:
        """Return a live score by id, or None."""
        rows = self._rows(project, self._resolved("id = {id:String}", "1"), {"id": score_id})
        return rows[0] if rows else None

    def page(self, project: str, query: ScoreQuery, limit: int) -> list[ScoreRow]:
        """Return up to ``limit`` scores matching ``query``, newest first, after its position."""
        pre, post = ["1"], ["1"]
        params: dict[str, Any] = {}
        if query.request_id is not None:
            pre.append(self._ids_at("target = {r:String}"))
            post.append("s.request_id = {r:String}")
            params["r"] = query.request_id
        if query.trace_id is not None:
            pre.append(self._ids_at("target = {t:String}"))
            post.append("s.trace_id = {t:String}")
            params["t"] = query.trace_id
        if query.session_id is not None:
            pre.append(self._ids_at("target = {sess:String}"))
            post.append("s.session_id = {sid:String}")
            params["sess"], params["sid"] = session_target(query.session_id), query.session_id
        if query.name is not None:
            pre.append(_ids_of("name = {n:String}", self.table))
            post.append("s.name = {n:String}")
            params["n"] = query.name
        if query.source is not None:
            post.append("s.source = {src:String}")
            params["src"] = query.source
        if query.after is not None:
            post.append("(s.created_at, id) < ({at:DateTime64(3, 'UTC')}, {aid:String})")
            params["at"], params["aid"] = query.after
        sql = self._resolved(
            " AND ".join(pre),
            " AND ".join(post),
            "ORDER BY s.created_at DESC, id DESC LIMIT {limit:UInt32}",
        )
        return self._rows(project, sql, {**params, "limit": limit})

    def for_targets(
        self,
        project: str,
        request_ids: Sequence[str],
        trace_ids: Sequence[str] = (),
        session_ids: Sequence[str] = (),
    ) -> list[ScoreRow]:
        """Return the live scores on any of these records, traces or sessions, newest first.

        Read from SCORES_BY_TARGET: every stored version at these targets (a handful of key
        lookups), resolved here by :func:`live_on_targets`.
        """
        versions = self._versions_at(project, request_ids, trace_ids, VERSION_COLUMNS, session_ids)
        return live_on_targets(project, versions, request_ids, trace_ids, session_ids)

    def values_on_targets(
        self,
        project: str,
        request_ids: Sequence[str],
        trace_ids: Sequence[str] = (),
        session_ids: Sequence[str] = (),
    ) -> list[ScoreValue]:
        """The live scores on any of these records, traces or sessions as means read them,
        newest first: :meth:`for_targets` without the four columns no list shows (each
        column read costs chDB a fixed ~0.4 ms a part)."""
        versions = self._versions_at(
            project, request_ids, trace_ids, VALUE_VERSION_COLUMNS, session_ids
        )
        values = [
            ScoreValue(
                id=str(v[1]),
                request_id=str(v[4]) or None,
                trace_id=str(v[5]) or None,
                name=str(v[6]),
                data_type=str(v[7]),
                value=json.loads(v[8]),
                created_at=as_utc(v[9]),
                session_id=str(v[10]) or None,
            )
            for v in live_at_targets(versions, request_ids, trace_ids, session_ids)
        ]
        values.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        return values

    def _versions_at(
        self,
        project: str,
        request_ids: Sequence[str],
        trace_ids: Sequence[str],
        columns: str,
        session_ids: Sequence[str] = (),
    ) -> Sequence[Sequence[Any]]:
        """``columns`` of every version stored at these records, traces and sessions (none
        for none)."""
        # '' is no target: a record's score has no trace id and the reverse.
        sessions = (session_target(s) for s in session_ids if s)
        targets = sorted({t for t in (*request_ids, *trace_ids) if t} | set(sessions))
        if not targets:
            return []
        # Only a trace brings the versions on its span records: with records alone, a key
        # read of fewer columns (score_sql.score_versions).
        traces = sorted({t for t in trace_ids if t})
        records_only = not traces and not any(session_ids)
        return self._client.query(
            score_versions(
                self._by_target,
                "p",
                "{targets:Array(String)}",
                columns,
                None if records_only else "{traces:Array(String)}" if traces else "",
            ),
            parameters={"p": project, "targets": targets, "traces": traces},
            settings=self._read_settings,
        ).result_rows

    # -- configs ---------------------------------------------------------------------------

    def put_config(self, project: str, config: ScoreConfigRow) -> WriteOutcome:
        """Store (replace) the config of one score name; answers as :meth:`insert` does."""
        return self._config_store.put(project, config)

    def configs(self, project: str, names: Iterable[str] | None = None) -> list[ScoreConfigRow]:
        """Return the project's configs (of ``names`` only, when given), by name."""
        return self._config_store.read(project, names)


def _version_values(
    r: ScoreRow, deleted: bool, written: datetime, record_at: datetime | None
) -> list[Any]:
    """A version's row; ``record_at``: the record time it is summed under (None: PENDING)."""
    return [
        r.project,
        r.id,
        r.request_id or "",
        r.trace_id or "",
        r.name,
        r.data_type,
        json.dumps(r.value, ensure_ascii=False),
        r.value_number,
        r.value_text,
        r.comment,
        r.correction,
        r.source,
        json.dumps(r.metadata, ensure_ascii=False),
        r.created_at,
        int(deleted),
        r.session_id or "",
        record_at if record_at is not None and on_record(r) else PENDING,
        written,
    ]


def _ids_of(condition: str, table: str) -> str:
    """Ids of the project's scores any version of which meets ``condition``."""
    return f"id IN (SELECT id FROM {table} WHERE project = {{p:String}} AND {condition})"


def _record_names(rows: Iterable[ScoreRow]) -> dict[str, set[str]]:
    """The names of the records' scores among ``rows``, per project."""
    names: dict[str, set[str]] = {}
    for r in rows:
        if on_record(r):
            names.setdefault(r.project, set()).add(r.name)
    return names


def _target_of(row: ScoreRow) -> str:
    """A score's target as SCORES_BY_TARGET keys it (score_tables.TARGET_OF, in Python)."""
    if row.session_id:
        return session_target(row.session_id)
    return row.trace_id or row.request_id or ""
