"""The score tables: their DDL, and the field lists the score SQL is built from.

Apart from the queries so the migrations import only what they create, and so the score
store (:mod:`.scores`) and the score SQL other stores borrow (:mod:`.score_sql`) build on one
definition of a score's fields.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .schema import Backfill, Table, View

SCORES = Table(
    name="scores",
    columns=(
        "project String",
        "id String",
        "request_id String",  # '' on a trace's or a session's score
        "trace_id String",  # '' on a record's or a session's score
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
        # '' on a record's or a trace's score (migration 37); last, where ADD COLUMN puts it.
        "session_id String DEFAULT ''",
        # The time of the score's record the version was summed under in SCORE_SUMS_BY_TIME
        # (migration 42): PENDING when the record was not stored yet, or the score is not a
        # record's, or the version was stored before the migration (see score_times.py).
        "record_at DateTime64(3, 'UTC') DEFAULT toDateTime64(0, 3, 'UTC')",
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

# A score's target as the by-target tables key it (migration 37): a session's id behind
# SESSION_TARGET, a trace's id, else a record's. A record's id (``req_`` and no colon) and a
# trace's (32 hex) never hold a colon, so a session's target can be neither; the reads check
# each version's own field besides, so a score's request_id of any text is never mistaken
# for a session's either.
SESSION_TARGET = "session:"
TARGET_OF = (
    f"multiIf(session_id != '', concat('{SESSION_TARGET}', session_id), "
    "trace_id != '', trace_id, request_id)"
)
# What a sum's ``on_trace`` says of its target: 0 a record, 1 a trace, 2 a session.
ON_SESSION = 2


def session_target(session_id: str) -> str:
    """The by-target key of a session's scores (:data:`TARGET_OF`)."""
    return f"{SESSION_TARGET}{session_id}"


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
        "on_trace UInt8",  # 1: target is a trace id, 0: a record id, 2: a session id
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

_SUMMED = (
    "value_text, if(is_deleted = 1, -1., 1.) * ifNull(value_number, 0.) AS total, "
    "toInt64(if(is_deleted = 1, -1, 1) * isNotNull(value_number)) AS numbers, "
    "toInt64(if(is_deleted = 1, -1, 1)) AS scores FROM {db}.scores"
)

# The view as migration 16 made it, before scores had sessions: what that migration creates
# (the scores table it reads may have no ``session_id`` yet); migration 37 gives it the query
# below.
SCORE_SUMS_MV_BEFORE_37 = View(
    name="score_sums_mv",
    to_table="score_sums",
    select=(
        "SELECT project, name, toUInt8(trace_id != '') AS on_trace, "
        f"if(trace_id != '', trace_id, request_id) AS target, {_SUMMED}"
    ),
)

# A session's scores are summed apart from the records' and traces' (``on_trace`` 2) under
# the session's own id: the log's score filters read 0 and 1 only.
SCORE_SUMS_MV = View(
    name="score_sums_mv",
    to_table="score_sums",
    select=(
        "SELECT project, name, "
        f"toUInt8(multiIf(session_id != '', {ON_SESSION}, trace_id != '', 1, 0)) AS on_trace, "
        "multiIf(session_id != '', session_id, trace_id != '', trace_id, request_id) AS target, "
        f"{_SUMMED}"
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
        # Not ``record_at``: only the sums by time and the tombstones need it (SCORES).
        *(c for c in SCORES.columns if c.split()[0] not in ("project", "id", "record_at")),
    ),
    engine="ReplacingMergeTree",
    engine_args=("written_at",),
    order_by="(project, target, id)",
    # Small compressed blocks (migration 43): a page's targets with random ids are each a
    # granule of their own, and each decompressed a whole block of 64 KiB or more per column
    # (a page's score read 14.5 -> 9.1 ms in process at 300k records, +5% on disk).
    settings=(
        "index_granularity = 256",
        "min_compress_block_size = 4096",
        "max_compress_block_size = 65536",
    ),
)

# The view as migration 22 made it, before scores had sessions (see SCORE_SUMS_MV_BEFORE_37).
SCORES_BY_TARGET_MV_BEFORE_37 = View(
    name="scores_by_target_mv",
    to_table="scores_by_target",
    select=(
        "SELECT project, if(trace_id != '', trace_id, request_id) AS target, id, "
        + ", ".join(
            c.split()[0]
            for c in SCORES.columns
            if c.split()[0] not in ("project", "id", "session_id", "record_at")
        )
        + " FROM {db}.scores"
    ),
)

SCORES_BY_TARGET_MV = View(
    name="scores_by_target_mv",
    to_table="scores_by_target",
    select=(
        f"SELECT project, {TARGET_OF} AS target, id, "
        + ", ".join(
            c.split()[0]
            for c in SCORES.columns
            if c.split()[0] not in ("project", "id", "record_at")
        )
        + " FROM {db}.scores"
    ),
)

SCORE_FIELDS = (
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
    "session_id",
    "record_at",
)
# The fields of the scores stored before migration 37 (no session): what its seed reads.
_FIELDS_BEFORE_37 = SCORE_FIELDS[:-2]

# What a read returns after the id, in ScoreRow's order.
READ_FIELDS = (
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
    "session_id",
)
FIELD_REF = re.compile(r"\bs\.(" + "|".join(SCORE_FIELDS) + r")\b")

# The scores stored before migration 22, each id's newest version at its target (a moved
# score's older targets then hold nothing of it: correct, whether or not the move was stored
# with a tombstone, as it was not before migration 16).
_SCORES_BY_TARGET_SEED = View(
    name="scores_by_target_seed",
    to_table="scores_by_target",
    select=FIELD_REF.sub(
        lambda m: f"tupleElement(s, {SCORE_FIELDS.index(m[1]) + 1})",
        "SELECT project, if(s.trace_id != '', s.trace_id, s.request_id) AS target, id, "
        + ", ".join(f"s.{f}" for f in _FIELDS_BEFORE_37 if f != "is_deleted")
        + ", w, s.is_deleted FROM (SELECT project, id, argMax(tuple("
        + ", ".join(_FIELDS_BEFORE_37)
        + "), written_at) AS s, max(written_at) AS w FROM {db}.scores GROUP BY project, id)",
    ),
)
# Its columns as the seed writes them (a score stored before migration 37 has no session).
_SCORES_BY_TARGET_BEFORE_37 = replace(
    SCORES_BY_TARGET,
    columns=tuple(c for c in SCORES_BY_TARGET.columns if c.split()[0] != "session_id"),
)
SCORES_BY_TARGET_SEED = Backfill(_SCORES_BY_TARGET_SEED, _SCORES_BY_TARGET_BEFORE_37)

# The sums again, keyed by the time of the scored record (migration 42): a list page's window
# of records is one run of this key per name (plus the PENDING run), whatever shape the
# record ids have, where SCORE_SUMS keys them by record id and a window of random ids reads
# most of the name's rows (docs/benchmarks.md, "Scores at scale"). Each score version
# carries the ``record_at`` it is summed under (SCORES), written by ScoreStore.insert from a
# lookup of ``request_ids`` (PENDING when the record is not stored yet, and for a trace's or
# a session's score); a tombstone copies its version's, so it cancels under the same key,
# and a pending score is moved to its record's time, once the record is stored, by a
# tombstone at PENDING and a new version at the time (score_times.rekey_pending).
SCORE_SUMS_BY_TIME = Table(
    name="score_sums_by_time",
    columns=(
        "project String",
        "name String",
        "on_trace UInt8",  # as SCORE_SUMS': 0 a record, 1 a trace, 2 a session
        "record_at DateTime64(3, 'UTC')",  # the record's time, or PENDING
        "target String",
        "value_text String",
        "total Float64",
        "numbers Int64",
        "scores Int64",
    ),
    engine="SummingMergeTree",
    engine_args=("(total, numbers, scores)",),
    order_by="(project, name, on_trace, record_at, target, value_text)",
)

SCORE_SUMS_BY_TIME_MV = View(
    name="score_sums_by_time_mv",
    to_table="score_sums_by_time",
    select=(
        "SELECT project, name, "
        f"toUInt8(multiIf(session_id != '', {ON_SESSION}, trace_id != '', 1, 0)) AS on_trace, "
        "record_at, "
        "multiIf(session_id != '', session_id, trace_id != '', trace_id, request_id) AS target, "
        f"{_SUMMED}"
    ),
)

# The sums stored before migration 42, from SCORE_SUMS, each record's under its time as
# ``request_ids`` says when the migration runs (read once, for the scored records only), or
# PENDING when it is not stored yet: the rule by which score_times.summed_at finds the key of
# a version stored before (its ``record_at`` reads PENDING). Written only into an empty
# table, as SCORE_SUMS_SEED.
_SCORE_SUMS_BY_TIME_SEED = View(
    name="score_sums_by_time_seed",
    to_table="score_sums_by_time",
    select=(
        "SELECT s.project AS project, s.name AS name, s.on_trace AS on_trace, "
        "if(s.on_trace = 0, ifNull(r.at, toDateTime64(0, 3, 'UTC')), "
        "toDateTime64(0, 3, 'UTC')) AS record_at, s.target AS target, "
        "s.value_text AS value_text, s.t AS total, s.n AS numbers, s.c AS scores "
        "FROM (SELECT project, name, on_trace, target, value_text, sum(total) AS t, "
        "sum(numbers) AS n, sum(scores) AS c FROM {db}.score_sums "
        "GROUP BY project, name, on_trace, target, value_text HAVING c != 0) AS s "
        "LEFT JOIN (SELECT toString(project) AS project, id, "
        "toNullable(min(created_at)) AS at FROM {db}.request_ids "
        "WHERE (toString(project), id) IN (SELECT project, target FROM {db}.score_sums "
        "WHERE on_trace = 0) GROUP BY project, id) AS r "
        "ON s.project = r.project AND s.target = r.id "
        "WHERE (SELECT count() FROM {db}.score_sums_by_time) = 0"
    ),
)
SCORE_SUMS_BY_TIME_SEED = Backfill(_SCORE_SUMS_BY_TIME_SEED, SCORE_SUMS_BY_TIME)

# The score names with a score on a span record (migration 48): a record that is no model call
# and has a trace, whose scores count for the trace (score_sql.span_records). Which names
# have one was a lookup of every span record's id in the name's sums (~3M ids at 10M records,
# 2-3 s on a collector's first score-filtered page); the score store now adds a name here
# before it writes a score on a stored span record, or moves an early one onto its record once
# that record lands and is a span (store/scores.py). A score whose record is not stored yet is
# in the PENDING run until then, which the read of the names looks at too
# (score_sql.traced_names). A row stays when the scores go: a stale name only reads a trace
# half for nothing, never hides a score.
SCORE_SPAN_NAMES = Table(
    name="score_span_names",
    columns=("project String", "name String"),
    engine="ReplacingMergeTree",
    order_by="(project, name)",
)

# The names scored on stored span records before migration 48: the scored records (the sums
# by time's record half, keyed by their time) looked up by key in ``request_items``, so the
# seed reads as many records as there are scores of records, not every span of the log.
# A record stored after its score is in the PENDING run (read with the names, above).
_SCORE_SPAN_NAMES_SEED = View(
    name="score_span_names_seed",
    to_table="score_span_names",
    select=(
        "SELECT DISTINCT project, name FROM {db}.score_sums_by_time WHERE on_trace = 0 "
        "AND record_at != toDateTime64(0, 3, 'UTC') AND (project, record_at, target) IN ("
        "SELECT toString(project), created_at, id FROM {db}.request_items WHERE "
        "(toString(project), created_at, id) IN (SELECT project, record_at, target FROM "
        "{db}.score_sums_by_time WHERE on_trace = 0 AND record_at != toDateTime64(0, 3, 'UTC')) "
        "AND kind NOT IN ('llm', 'embedding') AND trace_id != '')"
    ),
)
SCORE_SPAN_NAMES_SEED = Backfill(_SCORE_SPAN_NAMES_SEED, SCORE_SPAN_NAMES)
