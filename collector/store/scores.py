"""Scores and score configs (CONTRACT 9): every SQL statement that reads or writes them.

A score is only ever inserted: a repeat of its id is a newer row (``written_at``), a delete a
newer row with ``is_deleted = 1``. The table is sorted by ``(project, id)``, so every version
of one score shares a key. A read never trusts a row's target (``request_id``/``trace_id``)
before resolving its id: it finds the candidate ids (any version that ever pointed at the
target, through a bloom filter), then takes each id's newest version by key and filters on
*that*. A replacement that moved a score to another record or name therefore never leaves the
old one visible, before or after a merge (see docs/architecture.md, "Scores").
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Backfill, Table, View, quote
from .traced_score_names import TracedScoreNames

SCORES = Table(
    name="scores",
    columns=(
        "project String",
        "id String",
        "request_id String",  # '' on a trace's score
        "trace_id String",  # '' on a record's score
        "name String",
        "data_type LowCardinality(String)",
        "value String",  # the value's JSON text, returned as given
        "value_number Nullable(Float64)",  # numeric, or boolean as 1/0: what means average
        "value_text String",  # categorical, or boolean as true/false: what filters match
        "comment Nullable(String)",
        "correction Nullable(String)",
        "source LowCardinality(String)",
        "metadata String",
        "created_at DateTime64(3, 'UTC')",
        "written_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("written_at", "is_deleted"),
    order_by="(project, id)",
    indexes=(
        "INDEX idx_request request_id TYPE bloom_filter GRANULARITY 1",
        "INDEX idx_trace trace_id TYPE bloom_filter GRANULARITY 1",
        "INDEX idx_name name TYPE bloom_filter GRANULARITY 4",
    ),
)

# One row per (project, name); the newest write wins.
SCORE_CONFIGS = Table(
    name="score_configs",
    columns=(
        "project String",
        "name String",
        "data_type LowCardinality(String)",
        "min Nullable(Float64)",
        "max Nullable(Float64)",
        "categories Array(String)",
        "has_categories UInt8",
        "description Nullable(String)",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, name)",
)

# Per (project, name, target, value): the sums of the live scores (migration 16). The view
# below adds every score row as it is inserted: a live version with sign +1, a tombstone with
# sign -1. A tombstone always carries the fields of the live version it ends (a delete copies
# them; a replacement is preceded, in the same insert block, by a tombstone of the version it
# replaces: ScoreStore.insert), so the sums count exactly the live scores whatever the merge
# order. The value is in the key: a version and its tombstone cancel exactly (same key, same
# number), and a key whose sums all reach 0 is dropped by the next merge.
SCORE_SUMS = Table(
    name="score_sums",
    columns=(
        "project String",
        "name String",
        "on_trace UInt8",  # 1: target is a trace id, 0: a record id
        "target String",
        "value_text String",
        "total Float64",  # sum of value_number (numeric, boolean as 1/0)
        "numbers Int64",  # how many of them have a value_number
        "scores Int64",  # how many scores
    ),
    engine="SummingMergeTree",
    engine_args=("(total, numbers, scores)",),
    order_by="(project, name, on_trace, target, value_text)",
)

SCORE_SUMS_MV = View(
    name="score_sums_mv",
    to_table="score_sums",
    select=(
        "SELECT project, name, toUInt8(trace_id != '') AS on_trace, "
        "if(trace_id != '', trace_id, request_id) AS target, value_text, "
        "if(is_deleted = 1, -1., 1.) * ifNull(value_number, 0.) AS total, "
        "toInt64(if(is_deleted = 1, -1, 1) * isNotNull(value_number)) AS numbers, "
        "toInt64(if(is_deleted = 1, -1, 1)) AS scores FROM {db}.scores"
    ),
)

# The sums of the scores stored before migration 16: each id's newest version, when live.
# Written only into an empty table, so that a migration run twice (two collectors starting
# at once, a start that stopped before recording it) never counts a score twice.
_SCORE_SUMS_SEED = View(
    name="score_sums_seed",
    to_table="score_sums",
    select=(
        "SELECT project, s.3 AS name, toUInt8(s.2 != '') AS on_trace, "
        "if(s.2 != '', s.2, s.1) AS target, s.4 AS value_text, "
        "ifNull(s.5, 0.) AS total, toInt64(isNotNull(s.5)) AS numbers, toInt64(1) AS scores "
        "FROM (SELECT project, id, argMax(tuple(request_id, trace_id, name, value_text, "
        "value_number, is_deleted), written_at) AS s FROM {db}.scores GROUP BY project, id) "
        "WHERE s.6 = 0 AND (SELECT count() FROM {db}.score_sums) = 0"
    ),
)
SCORE_SUMS_SEED = Backfill(_SCORE_SUMS_SEED, SCORE_SUMS)

# Which score ids ever pointed at a record or trace (migration 16): a detail's or a list
# page's candidates are a range of this key instead of a bloom filter test of every granule
# of ``scores``. Only ever widens the candidates (an id stays after it moved), and a repeat
# is harmless, so a plain MergeTree and a plain backfill. No longer read or written: its
# view is dropped by migration 26 (every read takes its candidates from SCORES_BY_TARGET,
# and the view cost each score write a third insert); the table stays, as a dropped view's.
SCORE_TARGETS = Table(
    name="score_targets",
    columns=("project String", "target String", "id String"),
    order_by="(project, target, id)",
)

SCORE_TARGETS_MV = View(
    name="score_targets_mv",
    to_table="score_targets",
    select=(
        "SELECT project, if(trace_id != '', trace_id, request_id) AS target, id "
        "FROM {db}.scores WHERE is_deleted = 0"
    ),
)

# Every version of every score, by target (migration 22): what a record's detail and a list
# page read. A replacement that moves a score is preceded by a tombstone of the version it
# replaces, at the old target (ScoreStore.insert), so the newest row of each (target, id)
# says exactly whether that score is live on that target; no read of ``scores`` by id, whose
# sort key scatters a page's few ids over every granule, is needed. Fine granules: each read is
# a handful of key lookups. A row written twice (the view and the backfill) changes no newest
# version.
SCORES_BY_TARGET = Table(
    name="scores_by_target",
    columns=(
        "project String",
        "target String",
        "id String",
        *(c for c in SCORES.columns if c.split()[0] not in ("project", "id")),
    ),
    engine="ReplacingMergeTree",
    engine_args=("written_at",),
    order_by="(project, target, id)",
    settings=("index_granularity = 256",),
)

SCORES_BY_TARGET_MV = View(
    name="scores_by_target_mv",
    to_table="scores_by_target",
    select=(
        "SELECT project, if(trace_id != '', trace_id, request_id) AS target, id, "
        + ", ".join(c.split()[0] for c in SCORES.columns if c.split()[0] not in ("project", "id"))
        + " FROM {db}.scores"
    ),
)

_FIELDS = (
    "request_id",
    "trace_id",
    "name",
    "data_type",
    "value",
    "value_number",
    "value_text",
    "comment",
    "correction",
    "source",
    "metadata",
    "created_at",
    "is_deleted",
)

# What a read returns after the id, in ScoreRow's order.
_READ = (
    "request_id",
    "trace_id",
    "name",
    "data_type",
    "value",
    "comment",
    "correction",
    "source",
    "metadata",
    "created_at",
)
_FIELD_REF = re.compile(r"\bs\.(" + "|".join(_FIELDS) + r")\b")

# The scores stored before migration 22, each id's newest version at its target (a moved
# score's older targets then hold nothing of it: correct, whether or not the move was stored
# with a tombstone, as it was not before migration 16).
_SCORES_BY_TARGET_SEED = View(
    name="scores_by_target_seed",
    to_table="scores_by_target",
    select=_FIELD_REF.sub(
        lambda m: f"tupleElement(s, {_FIELDS.index(m[1]) + 1})",
        "SELECT project, if(s.trace_id != '', s.trace_id, s.request_id) AS target, id, "
        + ", ".join(f"s.{f}" for f in _FIELDS if f != "is_deleted")
        + ", w, s.is_deleted FROM (SELECT project, id, argMax(tuple("
        + ", ".join(_FIELDS)
        + "), written_at) AS s, max(written_at) AS w FROM {db}.scores GROUP BY project, id)",
    ),
)
SCORES_BY_TARGET_SEED = Backfill(_SCORES_BY_TARGET_SEED, SCORES_BY_TARGET)


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
    after: tuple[datetime, str] | None = None


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
        self._configs = f"{db}.{quote(SCORE_CONFIGS.name)}"
        self._by_target = f"{db}.{quote(SCORES_BY_TARGET.name)}"
        self._columns = ["project", "id", *_FIELDS, "written_at"]
        self._types = SCORES.column_types(self._columns)
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read_settings: dict[str, Any] = (
            {"select_sequential_consistency": 1} if cluster else {}
        )
        self._write_lock = threading.Lock()

    # -- writes ----------------------------------------------------------------------------

    def insert(self, rows: Sequence[ScoreRow], deleted: bool = False) -> None:
        """Store scores (each a new version of its id); ``deleted`` stores tombstones.

        A repeated id within ``rows`` keeps its last row. Each id's live version, if any, is
        read first and ended in the same insert block: a replacement is preceded by a
        tombstone of the version it replaces (a microsecond older, so the new one stands),
        and a delete is a tombstone of the live version as it is now (nothing for an id no
        longer live). The sums view (SCORE_SUMS) subtracts exactly what each tombstone
        ends. The lock makes read-then-insert atomic among this process's writers, so two
        concurrent writes of one id never end the same version twice.
        """
        latest = {(r.project, r.id): r for r in rows}
        if not latest:
            return
        if not deleted:
            for r in latest.values():
                if r.trace_id:
                    self.traced_names.note(r.project, (r.name,))
        with self._write_lock:
            live = self._live_versions(latest)
            written = datetime.now(UTC)
            ended = written - timedelta(microseconds=1)
            if deleted:
                block = [self._values(r, True, written) for r in live.values()]
            else:
                block = [self._values(r, True, ended) for r in live.values()]
                block += [self._values(r, False, written) for r in latest.values()]
            if not block:
                return
            self._client.insert(
                self.table,
                block,
                column_names=self._columns,
                column_type_names=self._types,
                settings=self._write_settings,
            )

    def _live_versions(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], ScoreRow]:
        """The live version of each (project, id) of ``keys`` that has one."""
        by_project: dict[str, list[str]] = {}
        for project, score_id in keys:
            by_project.setdefault(project, []).append(score_id)
        found: dict[tuple[str, str], ScoreRow] = {}
        for project, ids in by_project.items():
            sql = self._resolved("id IN {ids:Array(String)}", "1")
            for row in self._rows(project, sql, {"ids": ids}):
                found[(project, row.id)] = row
        return found

    @staticmethod
    def _values(r: ScoreRow, deleted: bool, written: datetime) -> list[Any]:
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
            written,
        ]

    def delete_for_targets(
        self, project: str, request_ids: Sequence[str], trace_ids: Sequence[str] = ()
    ) -> int:
        """Store a tombstone for every live score on these records (or traces); count them."""
        rows = self.for_targets(project, request_ids, trace_ids)
        self.insert(rows, deleted=True)
        return len(rows)

    # -- reads -----------------------------------------------------------------------------

    def _resolved(self, candidates: str, post: str, tail: str = "") -> str:
        """The newest version of each candidate id, kept when alive and ``post`` holds.

        ``candidates`` narrows the ids before they are resolved (it may only ever widen what
        ``post`` then keeps); ``post`` filters the resolved fields, named ``s.<field>``.
        """
        fields = ", ".join(_FIELDS)
        shown = ", ".join(f"s.{f}" for f in _READ)
        sql = (
            f"SELECT id, {shown} FROM ("
            f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {self.table} "
            f"WHERE project = {{p:String}} AND {candidates} GROUP BY id"
            f") WHERE s.is_deleted = 0 AND {post} {tail}"
        )
        # The tuple is positional: s.<field> names its element by place.
        return _FIELD_REF.sub(lambda m: f"tupleElement(s, {_FIELDS.index(m[1]) + 1})", sql)

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
        return [_row(project, row) for row in result.result_rows]

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
        self, project: str, request_ids: Sequence[str], trace_ids: Sequence[str] = ()
    ) -> list[ScoreRow]:
        """Return the live scores on any of these records or traces, newest first.

        Read from SCORES_BY_TARGET: every stored version at these targets (a handful of key
        lookups), resolved here by :func:`live_on_targets`.
        """
        versions = self._versions_at(project, request_ids, trace_ids, VERSION_COLUMNS)
        return live_on_targets(project, versions, request_ids, trace_ids)

    def values_on_targets(
        self, project: str, request_ids: Sequence[str], trace_ids: Sequence[str] = ()
    ) -> list[ScoreValue]:
        """The live scores on any of these records or traces as means read them, newest
        first: :meth:`for_targets` without the four columns no list shows (each column
        read costs chDB a fixed ~0.4 ms a part)."""
        versions = self._versions_at(project, request_ids, trace_ids, VALUE_VERSION_COLUMNS)
        values = [
            ScoreValue(
                id=str(v[1]),
                request_id=str(v[4]) or None,
                trace_id=str(v[5]) or None,
                name=str(v[6]),
                data_type=str(v[7]),
                value=json.loads(v[8]),
                created_at=_utc(v[9]),
            )
            for v in _live_at_targets(versions, request_ids, trace_ids)
        ]
        values.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        return values

    def _versions_at(
        self, project: str, request_ids: Sequence[str], trace_ids: Sequence[str], columns: str
    ) -> Sequence[Sequence[Any]]:
        """``columns`` of every version stored at these records and traces (none for none)."""
        # '' is no target: a record's score has no trace id and the reverse.
        targets = sorted({t for t in (*request_ids, *trace_ids) if t})
        if not targets:
            return []
        return self._client.query(
            score_versions(self._by_target, "p", "{targets:Array(String)}", columns),
            parameters={"p": project, "targets": targets},
            settings=self._read_settings,
        ).result_rows

    # -- configs ---------------------------------------------------------------------------

    def put_config(self, project: str, config: ScoreConfigRow) -> None:
        """Store (replace) the config of one score name."""
        self._client.insert(
            self._configs,
            [
                [
                    project,
                    config.name,
                    config.data_type,
                    config.min,
                    config.max,
                    config.categories or [],
                    int(config.categories is not None),
                    config.description,
                    config.updated_at,
                ]
            ],
            column_names=SCORE_CONFIGS.inserted_columns(),
            column_type_names=SCORE_CONFIGS.column_types(SCORE_CONFIGS.inserted_columns()),
            settings=self._write_settings,
        )

    def configs(self, project: str, names: Iterable[str] | None = None) -> list[ScoreConfigRow]:
        """Return the project's configs (of ``names`` only, when given), by name."""
        wanted = None if names is None else sorted(set(names))
        if wanted == []:
            return []
        rows = self._client.query(
            "SELECT name, data_type, min, max, categories, has_categories, description, "
            f"updated_at FROM {self._configs} FINAL WHERE project = {{p:String}} "
            + ("AND name IN {names:Array(String)} " if wanted is not None else "")
            + "ORDER BY name",
            parameters={"p": project, "names": wanted or []},
            settings=self._read_settings,
        ).result_rows
        return [
            ScoreConfigRow(
                name=str(r[0]),
                data_type=str(r[1]),
                min=r[2],
                max=r[3],
                categories=list(r[4]) if r[5] else None,
                description=r[6],
                updated_at=_utc(r[7]),
            )
            for r in rows
        ]


# A stored version at a target as :func:`score_versions` reads it: where it is, which score and
# when it was written, whether it ends the score, then what a read returns (ScoreRow's order).
_VERSION = ("target", "id", "written_at", "is_deleted", *_READ)
VERSION_COLUMNS = ", ".join(_VERSION)
# The same for a mean (ScoreValue): the fields up to ``value``, then ``created_at``.
VALUE_VERSION_COLUMNS = (
    "target, id, written_at, is_deleted, request_id, trace_id, name, data_type, value, created_at"
)


def score_versions(
    by_target: str, project_param: str, targets: str, columns: str = VERSION_COLUMNS
) -> str:
    """SQL: every version stored in SCORES_BY_TARGET (the quoted ``by_target``) at the targets
    ``targets`` (SQL of an Array(String) or a subquery) of the project ``{<project_param>}``,
    as :func:`live_on_targets` reads them (``columns``: VALUE_VERSION_COLUMNS for means)."""
    return (
        f"SELECT {columns} FROM {by_target} "
        f"WHERE project = {{{project_param}:String}} AND target IN {targets}"
    )


def live_on_targets(
    project: str,
    versions: Iterable[Sequence[Any]],
    request_ids: Iterable[str],
    trace_ids: Iterable[str] = (),
) -> list[ScoreRow]:
    """The live scores on these records or traces, newest first, from :func:`score_versions`.

    The newest version of each (target, score id) says whether that score is live there: a
    replacement that moves a score, a delete and a record's delete all write a tombstone at
    the target the score leaves (ScoreStore.insert). Resolving the few versions of a detail or
    a page here costs less than ClickHouse grouping them (``argMax`` of a wide tuple).
    """
    live = [
        _row(project, (v[1], *v[4:])) for v in _live_at_targets(versions, request_ids, trace_ids)
    ]
    live.sort(key=lambda s: (s.created_at, s.id), reverse=True)
    return live


def _live_at_targets(
    versions: Iterable[Sequence[Any]], request_ids: Iterable[str], trace_ids: Iterable[str]
) -> list[Sequence[Any]]:
    """Of the versions read at some targets (target, id, written_at, is_deleted, request_id,
    trace_id, ...), each (target, score id)'s newest when it is live and on one of the
    records or traces asked for."""
    newest: dict[tuple[str, str], Sequence[Any]] = {}
    for version in versions:
        key = (version[0], version[1])
        kept = newest.get(key)
        if kept is None or version[2] > kept[2]:
            newest[key] = version
    rs = {r for r in request_ids if r}
    ts = {t for t in trace_ids if t}
    return [v for v in newest.values() if not v[3] and (v[4] in rs or v[5] in ts)]


def _ids_of(condition: str, table: str) -> str:
    """Ids of the project's scores any version of which meets ``condition``."""
    return f"id IN (SELECT id FROM {table} WHERE project = {{p:String}} AND {condition})"


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _row(project: str, row: Sequence[Any]) -> ScoreRow:
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
        created_at=_utc(created_at),
    )


@dataclass(frozen=True)
class ScoreTest:
    """One score filter of a list or export: ``score.<name>.min/.max``, ``=``, ``unscored``."""

    name: str
    kind: str  # "min", "max", "eq" or "unscored"
    value: float | str | None = None


def live_scores_of_name(table: str, name: str) -> str:
    """SQL: the project's live scores named ``{<name>:String}``: (sid, rq, tr, num, txt)."""
    fields = ", ".join(_FIELDS)
    sql = (
        "SELECT id AS sid, s.request_id AS rq, s.trace_id AS tr, s.value_number AS num, "
        f"s.value_text AS txt FROM (SELECT id, argMax(tuple({fields}), written_at) AS s "
        f"FROM {table} WHERE project = {{project:String}} AND id IN (SELECT id FROM {table} "
        f"WHERE project = {{project:String}} AND name = {{{name}:String}}) GROUP BY id) "
        f"WHERE s.is_deleted = 0 AND s.name = {{{name}:String}}"
    )
    return _FIELD_REF.sub(lambda m: f"tupleElement(s, {_FIELDS.index(m[1]) + 1})", sql)


def sibling(table: str, name: str) -> str:
    """The table ``name`` in the database of ``table`` (a quoted ``db.table``)."""
    return f"{table.rsplit('.', 1)[0]}.{quote(name)}"


def traced_names(table: str, names: Sequence[str]) -> str:
    """SQL: which of ``names`` (parameters ``{tn<i>:String}``) have a sum on a trace in the
    project ``{project:String}``: one key range read to its first row per name."""
    return " UNION ALL ".join(
        f"(SELECT name FROM {sibling(table, SCORE_SUMS.name)} WHERE project = {{project:String}} "
        f"AND name = {{tn{i}:String}} AND on_trace = 1 LIMIT 1)"
        for i in range(len(names))
    )


def read_traced_names(client: Client, table: str, project: str, names: Sequence[str]) -> list[str]:
    """Which of ``names`` have a score on a trace in ``project``, as the store says
    (``table``: the quoted scores table, whose sums are read)."""
    if not names:
        return []
    rows = client.query(
        traced_names(table, names),
        parameters={"project": project, **{f"tn{i}": n for i, n in enumerate(names)}},
    ).result_rows
    return [str(r[0]) for r in rows]


def score_clauses(
    tests: Sequence[ScoreTest],
    table: str,
    records: str | None = None,
    on_traces: frozenset[str] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Return WHERE clauses over a log table (``id``, ``trace_id``) for the score tests.

    ``table`` is the scores table; the clauses read its sums (SCORE_SUMS), never the scores
    themselves. A record's scores are its own and its trace's. ``eq`` keeps a record with
    any such score of that value; ``unscored`` one with none of that name; ``min``/``max``
    bound the mean of its numeric and boolean ones: the set of records that pass is one
    aggregation of the name's sums by record (a trace's sums counted on each record of the
    trace, found by the trace index of ``request_items``).

    ``records``: a condition over ``request_items`` that every record the read can return
    meets (the rest of its filter, a list page's window): only those records' sums are then
    read, e.g. the newest hour's thousand instead of every record the name ever scored.

    ``on_traces``: the names that may have scores on traces (:func:`traced_names`), when the
    caller asked; a test of any other name reads its records' sums only (the trace half of
    the clause, even when it finds nothing, costs as much as the record half).
    """
    sums, items = sibling(table, SCORE_SUMS.name), sibling(table, "request_items")
    among = records or "project = {project:String}"
    own_window = f" AND target IN (SELECT id FROM {items} WHERE {records})" if records else ""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for i, test in enumerate(tests):
        params[f"sn{i}"] = test.name
        named = f"FROM {sums} WHERE project = {{project:String}} AND name = {{sn{i}:String}}"
        if test.kind in ("eq", "unscored"):
            value = ""
            if test.kind == "eq":
                value = f" AND value_text = {{sv{i}:String}}"
                params[f"sv{i}"] = str(test.value)
            having = "GROUP BY target HAVING sum(scores) > 0"
            of_records = f"SELECT target {named}{value} AND on_trace = 0{own_window} {having}"
            of_traces = f"SELECT target {named}{value} AND on_trace = 1 {having}"
            scored = f"(id IN ({of_records}) OR (trace_id != '' AND trace_id IN ({of_traces})))"
            if on_traces is not None and test.name not in on_traces:
                scored = f"id IN ({of_records})"
            clauses.append(f"NOT {scored}" if test.kind == "unscored" else scored)
            continue
        own = f"SELECT target AS rid, total, numbers {named} AND on_trace = 0{own_window}"
        traced = (
            "SELECT r.id AS rid, s.total AS total, s.numbers AS numbers FROM (SELECT DISTINCT "
            f"id, trace_id FROM {items} WHERE {among} AND trace_id IN "
            f"(SELECT target {named} AND on_trace = 1)) AS r INNER JOIN (SELECT target, total, "
            f"numbers {named} AND on_trace = 1) AS s ON r.trace_id = s.target"
        )
        op = ">=" if test.kind == "min" else "<="
        params[f"sv{i}"] = float(test.value or 0)
        if on_traces is None or test.name in on_traces:
            own = f"{own} UNION ALL {traced}"
        clauses.append(
            f"id IN (SELECT rid FROM ({own}) GROUP BY rid "
            f"HAVING sum(numbers) > 0 AND sum(total) / sum(numbers) {op} {{sv{i}:Float64}})"
        )
    return clauses, params


def tombstones_for_records(table: str, record_ids: str) -> str:
    """SQL: insert a tombstone of every live score on the records ``record_ids`` selects.

    ``record_ids`` is a subquery (parameters ``{project:String}`` and its own); the tombstones
    are built inside ClickHouse, as the records' are (store/requests.py ``delete_matching``).
    """
    fields = ", ".join(_FIELDS)
    kept = ", ".join("toUInt8(1)" if f == "is_deleted" else f"s.{f}" for f in _FIELDS)
    sql = (
        f"INSERT INTO {table} (project, id, {fields}, written_at) "
        f"SELECT {{project:String}}, id, {kept}, now64(6) FROM ("
        f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {table} "
        f"WHERE project = {{project:String}} AND id IN (SELECT id FROM "
        f"{sibling(table, SCORES_BY_TARGET.name)} WHERE project = {{project:String}} AND target IN "
        f"({record_ids})) GROUP BY id) WHERE s.is_deleted = 0 AND s.request_id IN ({record_ids})"
    )
    return _FIELD_REF.sub(lambda m: f"tupleElement(s, {_FIELDS.index(m[1]) + 1})", sql)


def record_scores_json(table: str) -> str:
    """SQL expression: the JSON array of a log row's scores (its own and its trace's), newest
    first, as score objects; over a table with ``id`` and ``trace_id``.

    The project's live scores are read once per query into a map, target -> [(time, JSON)]
    (a scalar subquery), which every exported row looks its record and trace up in.
    """
    fields = ", ".join(_FIELDS)
    obj = (
        "concat('{\"id\":', toJSONString(id), ',\"request_id\":', "
        "if(s.request_id = '', 'null', toJSONString(s.request_id)), ',\"trace_id\":', "
        "if(s.trace_id = '', 'null', toJSONString(s.trace_id)), ',\"name\":', "
        "toJSONString(s.name), ',\"data_type\":', toJSONString(toString(s.data_type)), "
        "',\"value\":', s.value, ',\"comment\":', "
        "if(isNull(s.comment), 'null', toJSONString(assumeNotNull(s.comment))), "
        "',\"correction\":', "
        "if(isNull(s.correction), 'null', toJSONString(assumeNotNull(s.correction))), "
        "',\"source\":', toJSONString(toString(s.source)), ',\"metadata\":', s.metadata, "
        "',\"created_at\":', "
        "toJSONString(formatDateTime(s.created_at, '%Y-%m-%dT%H:%i:%S.%fZ')), '}')"
    )
    live = (
        f"SELECT if(s.request_id != '', concat('r:', s.request_id), "
        f"concat('t:', s.trace_id)) AS k, (s.created_at, {obj}) AS o FROM ("
        f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {table} "
        "WHERE project = {project:String} GROUP BY id) WHERE s.is_deleted = 0"
    )
    by_target = _FIELD_REF.sub(
        lambda m: f"tupleElement(s, {_FIELDS.index(m[1]) + 1})",
        "(SELECT CAST(mapFromArrays(groupArray(k), groupArray(os)), "
        "'Map(String, Array(Tuple(DateTime64(3, \\'UTC\\'), String)))') "
        f"FROM (SELECT k, groupArray(o) AS os FROM ({live}) GROUP BY k))",
    )
    return (
        "concat('[', arrayStringConcat(arrayMap(x -> x.2, arrayReverseSort(x -> x.1, "
        f"arrayConcat({by_target}[concat('r:', id)], if(trace_id != '', "
        f"{by_target}[concat('t:', trace_id)], [])))), ','), ']')"
    )
