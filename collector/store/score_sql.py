"""The score SQL other stores borrow: the request, trace, analytics and export reads.

The request log filters and sums records by their scores (:func:`score_clauses` over the
sums table), reads a record's scores by target (:func:`score_versions`, resolved by
:func:`live_on_targets`), ends the scores of deleted records (:func:`tombstones_for_records`)
and exports each record's scores (:func:`record_scores_json`). Apart from the score store
(:mod:`.scores`) so those stores depend on the rules of the score tables, not on the store
that serves ``/v1/scores``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clickhouse_connect.driver.client import Client

from .request_tables import REQUEST_IDS, TRACE_RECORDS
from .schema import quote
from .score_rows import ScoreRow, score_row
from .score_tables import (
    FIELD_REF,
    READ_FIELDS,
    SCORE_FIELDS,
    SCORE_SPAN_NAMES,
    SCORE_SUMS,
    SCORE_SUMS_BY_TIME,
    SCORES_BY_TARGET,
)

# The key of the sums whose record is not stored yet (score_times.PENDING), in SQL.
_PENDING = "toDateTime64(0, 3, 'UTC')"

# A score on a record that is no model call (an ``@observe`` function's, a chain's, a tool's
# span) counts for the record's trace wherever the log reads scores (docs/api-notes.md,
# "Scores and feedback"): the log shows model calls, so a thumb on the span would otherwise
# show nowhere. Which records those are is read when the scores are, from ``trace_records``
# (each trace's records by trace, with their kind), never fixed when the score is written:
# a score may arrive before its record.
_NOT_A_MODEL_CALL = "kind NOT IN ('llm', 'embedding')"

# A stored version at a target as :func:`score_versions` reads it: where it is, which score and
# when it was written, whether it ends the score, then what a read returns (ScoreRow's order).
_VERSION = ("target", "id", "written_at", "is_deleted", *READ_FIELDS)
VERSION_COLUMNS = ", ".join(_VERSION)
# The same for a mean (ScoreValue): the fields up to ``value``, then ``created_at``.
# Both end with ``session_id`` (READ_FIELDS'), which :func:`live_at_targets` reads as ``v[-1]``.
VALUE_VERSION_COLUMNS = (
    "target, id, written_at, is_deleted, request_id, trace_id, name, data_type, value, "
    "created_at, session_id"
)


def span_records(table: str, among: str | None = None) -> str:
    """SQL: ``(span_id, span_trace)`` of the project's (``{project:String}``) records that
    are no model call and have a trace (of the ids in the first column of the subquery
    ``among`` only, when given); ``table``: any quoted table of the store's database. A
    score on one of them counts for its trace."""
    of = f" AND id IN (SELECT target FROM ({among}))" if among is not None else ""
    return (
        f"SELECT id AS span_id, any(trace_id) AS span_trace FROM "
        f"{sibling(table, TRACE_RECORDS.name)} WHERE project = {{project:String}} "
        f"AND {_NOT_A_MODEL_CALL}{of} GROUP BY id"
    )


def span_ids(table: str, project_param: str = "project") -> str:
    """SQL: the ids of :func:`span_records` (every trace of the project)."""
    return (
        f"SELECT id FROM {sibling(table, TRACE_RECORDS.name)} "
        f"WHERE project = {{{project_param}:String}} AND {_NOT_A_MODEL_CALL}"
    )


def score_versions(
    by_target: str,
    project_param: str,
    targets: str,
    columns: str = VERSION_COLUMNS,
    traces: str | None = "",
) -> str:
    """SQL: every version stored in SCORES_BY_TARGET (the quoted ``by_target``) at the targets
    ``targets`` (SQL of an Array(String)) of the project ``{<project_param>}``, as
    :func:`live_on_targets` reads them (``columns``: VALUE_VERSION_COLUMNS for means).

    A target that is a trace brings the versions on its span records too (records that are
    no model call), each with ``trace_id`` read as that trace: they count for it. The span
    records are one key range of ``trace_records`` per trace, read once into an array pair
    (ids, traces): a join of the two tables cost a page ~10 ms, this ~3 ms.

    ``traces``: SQL of an Array(String) holding the traces among ``targets`` ("": any of
    them may be one), or None when every target is a record's id: the versions are then one
    key read, without the span records' lookup, and a version's ``request_id``,
    ``trace_id`` and ``session_id`` are not read but known (the target; none; none), since
    only a record's own score is keyed at a record id (TARGET_OF; a record id starts with
    ``req_``, a trace id is hex, a session target starts with ``session:``). In process at
    300k scores, random record ids, that took a list page's score read 16.6 -> ~10 ms of CPU.
    """
    if traces is None:
        known = {"request_id": "target", "trace_id": "''", "session_id": "''"}
        kept = ", ".join(
            f"{known[c.strip()]} AS {c.strip()}" if c.strip() in known else c.strip()
            for c in columns.split(",")
        )
        return (
            f"SELECT {kept} FROM {by_target} WHERE project = {{{project_param}:String}} "
            f"AND target IN {targets}"
        )
    spans = (
        "(SELECT (groupArray(id), groupArray(trace_id)) FROM "
        f"{sibling(by_target, TRACE_RECORDS.name)} WHERE project = {{{project_param}:String}} "
        f"AND trace_id IN {traces or targets} AND {_NOT_A_MODEL_CALL})"
    )
    span_of = "indexOf(tupleElement(sp, 1), target)"
    shown = ", ".join(
        f"if({span_of} > 0, tupleElement(sp, 2)[{span_of}], trace_id) AS trace_id"
        if c.strip() == "trace_id"
        else c.strip()
        for c in columns.split(",")
    )
    return (
        f"WITH {spans} AS sp SELECT {shown} FROM {by_target} "
        f"WHERE project = {{{project_param}:String}} "
        f"AND target IN arrayConcat({targets}, tupleElement(sp, 1))"
    )


def live_on_targets(
    project: str,
    versions: Iterable[Sequence[Any]],
    request_ids: Iterable[str],
    trace_ids: Iterable[str] = (),
    session_ids: Iterable[str] = (),
) -> list[ScoreRow]:
    """The live scores on these records or traces, newest first, from :func:`score_versions`.

    The newest version of each (target, score id) says whether that score is live there: a
    replacement that moves a score, a delete and a record's delete all write a tombstone at
    the target the score leaves (ScoreStore.insert). Resolving the few versions of a detail or
    a page here costs less than ClickHouse grouping them (``argMax`` of a wide tuple).
    """
    # A score on a span record comes with its trace as ``trace_id`` (:func:`score_versions`);
    # as a score object it is the record's alone, as stored.
    live = [
        score_row(project, (v[1], v[4], "" if v[4] else v[5], *v[6:]))
        for v in live_at_targets(versions, request_ids, trace_ids, session_ids)
    ]
    live.sort(key=lambda s: (s.created_at, s.id), reverse=True)
    return live


def live_at_targets(
    versions: Iterable[Sequence[Any]],
    request_ids: Iterable[str],
    trace_ids: Iterable[str],
    session_ids: Iterable[str] = (),
) -> list[Sequence[Any]]:
    """Of the versions read at some targets (target, id, written_at, is_deleted, request_id,
    trace_id, ..., session_id), each (target, score id)'s newest when it is live and on one
    of the records, traces or sessions asked for (a score on a span record with its trace as
    ``trace_id`` counts for that trace: :func:`score_versions`)."""
    newest: dict[tuple[str, str], Sequence[Any]] = {}
    for version in versions:
        key = (version[0], version[1])
        kept = newest.get(key)
        if kept is None or version[2] > kept[2]:
            newest[key] = version
    rs = {r for r in request_ids if r}
    ts = {t for t in trace_ids if t}
    ss = {s for s in session_ids if s}
    return [
        v
        for v in newest.values()
        if not v[3] and (v[4] in rs or v[5] in ts or (v[-1] and v[-1] in ss))
    ]


@dataclass(frozen=True)
class ScoreTest:
    """One score filter of a list or export: ``score.<name>.min/.max``, ``=``, ``unscored``."""

    name: str
    kind: str  # "min", "max", "eq" or "unscored"
    value: float | str | None = None


def live_scores_of_name(table: str, name: str) -> str:
    """SQL: the project's live scores named ``{<name>:String}``: (sid, rq, tr, num, txt)."""
    fields = ", ".join(SCORE_FIELDS)
    sql = (
        "SELECT id AS sid, s.request_id AS rq, s.trace_id AS tr, s.value_number AS num, "
        f"s.value_text AS txt FROM (SELECT id, argMax(tuple({fields}), written_at) AS s "
        f"FROM {table} WHERE project = {{project:String}} AND id IN (SELECT id FROM {table} "
        f"WHERE project = {{project:String}} AND name = {{{name}:String}}) GROUP BY id) "
        f"WHERE s.is_deleted = 0 AND s.name = {{{name}:String}}"
    )
    return FIELD_REF.sub(lambda m: f"tupleElement(s, {SCORE_FIELDS.index(m[1]) + 1})", sql)


def sibling(table: str, name: str) -> str:
    """The table ``name`` in the database of ``table`` (a quoted ``db.table``)."""
    return f"{table.rsplit('.', 1)[0]}.{quote(name)}"


def traced_names(table: str, names: Sequence[str]) -> str:
    """SQL: which of ``names`` (parameters ``{tn<i>:String}``) may have a score that counts
    for a trace in the project ``{project:String}``: a sum on a trace, a name noted with a
    score on a span record (SCORE_SPAN_NAMES), or a sum whose record was not stored when it
    was written (the PENDING run: its record may be a span). Three key ranges per name, each
    read to its first row, whatever the size of the log: the span half was a lookup of every
    span record's id (:func:`span_ids`), ~3M at 10M records."""
    project = "project = {project:String}"
    of_name = f"{project} AND name = {{tn%d:String}}"
    on_trace = (
        f"SELECT name FROM {sibling(table, SCORE_SUMS.name)} WHERE {of_name} AND on_trace = 1"
    )
    on_span = f"SELECT name FROM {sibling(table, SCORE_SPAN_NAMES.name)} WHERE {of_name}"
    pending = (
        f"SELECT name FROM {sibling(table, SCORE_SUMS_BY_TIME.name)} WHERE {of_name} "
        f"AND on_trace = 0 AND record_at = {_PENDING}"
    )
    return " UNION ALL ".join(
        f"({half % i} LIMIT 1)" for i in range(len(names)) for half in (on_trace, on_span, pending)
    )


def read_traced_names(client: Client, table: str, project: str, names: Sequence[str]) -> list[str]:
    """Which of ``names`` have a score counting for a trace in ``project`` (on a trace or on
    a span record), as the store says (``table``: the quoted scores table)."""
    if not names:
        return []
    rows = client.query(
        traced_names(table, names),
        parameters={"project": project, **{f"tn{i}": n for i, n in enumerate(names)}},
    ).result_rows
    return sorted({str(r[0]) for r in rows})


def score_clauses(
    tests: Sequence[ScoreTest],
    table: str,
    records: str | None = None,
    on_traces: frozenset[str] | None = None,
    window: str | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Return WHERE clauses over a log table (``id``, ``trace_id``) for the score tests.

    ``table`` is the scores table; the clauses read its sums (SCORE_SUMS), never the scores
    themselves. A record's scores are its own and its trace's, and a trace's are those on it
    and those on its span records (records that are no model call: :func:`span_records`),
    which then count for the trace alone, the span record included. ``eq`` keeps a record
    with any such score of that value; ``unscored`` one with none of that name;
    ``min``/``max`` bound the mean of its numeric and boolean ones: the set of records that
    pass is one aggregation of the name's sums by record (a trace's sums counted on each
    record of the trace, found by the trace index of ``request_items``).

    ``records``: a condition over ``request_items`` that every record the read can return
    meets (the rest of its filter, a list page's window): only those records' sums are then
    read, e.g. the newest hour's thousand instead of every record the name ever scored.

    ``on_traces``: the names that may have scores counting for traces (:func:`traced_names`),
    when the caller asked; a test of any other name reads its records' sums only (the trace
    half of the clause, even when it finds nothing, costs as much as the record half).

    ``window``: a condition on ``record_at`` that every record the read can return meets (a
    list page's pass, bounded by time): the records' own sums are then read from
    SCORE_SUMS_BY_TIME, one run of its key per name for the window plus the run of sums whose
    record was not stored when they were written (PENDING, moved out once it is: see
    score_times.py), whatever the records' ids; a target outside the window found there
    is dropped by the read's own bounds.
    """
    sums, items = sibling(table, SCORE_SUMS.name), sibling(table, "request_items")
    among = records or "project = {project:String}"
    own_window = f" AND target IN (SELECT id FROM {items} WHERE {records})" if records else ""
    own_sums = sums
    if window is not None:
        own_sums = sibling(table, SCORE_SUMS_BY_TIME.name)
        own_window = f" AND ({window} OR record_at = {_PENDING})"
    # A span record's scores count for its trace (the trace half), not a second time for
    # itself. Only a span record the read can return needs leaving out: with ``records``,
    # those among them (none on a list of model calls), not every span of the project.
    spans = span_ids(table)
    if records:
        spans = f"SELECT id FROM {items} WHERE {records} AND {_NOT_A_MODEL_CALL} AND trace_id != ''"
    not_spans = f" AND target NOT IN ({spans})"
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for i, test in enumerate(tests):
        params[f"sn{i}"] = test.name
        named = f"FROM {sums} WHERE project = {{project:String}} AND name = {{sn{i}:String}}"
        own_named = named.replace(sums, own_sums, 1)
        traced = on_traces is None or test.name in on_traces
        if test.kind in ("eq", "unscored"):
            value = ""
            if test.kind == "eq":
                value = f" AND value_text = {{sv{i}:String}}"
                params[f"sv{i}"] = str(test.value)
            having = "GROUP BY target HAVING sum(scores) > 0"
            of_records = f"SELECT target {own_named}{value} AND on_trace = 0{own_window} {having}"
            of_traces = f"SELECT target {named}{value} AND on_trace = 1 {having}"
            # The traces of the span records among the name's scored records.
            span_traces = (
                f"SELECT trace_id FROM {sibling(table, TRACE_RECORDS.name)} WHERE "
                f"project = {{project:String}} AND {_NOT_A_MODEL_CALL} AND id IN "
                f"(SELECT target {named}{value} AND on_trace = 0 {having})"
            )
            scored = (
                f"(id IN ({of_records}) OR (trace_id != '' AND (trace_id IN ({of_traces}) "
                f"OR trace_id IN ({span_traces}))))"
            )
            if not traced:
                scored = f"id IN ({of_records})"
            clauses.append(f"NOT {scored}" if test.kind == "unscored" else scored)
            continue
        own = f"SELECT target AS rid, total, numbers {own_named} AND on_trace = 0{own_window}"
        on_records = f"SELECT target, total, numbers {named} AND on_trace = 0"
        on_trace = (
            f"SELECT target, total, numbers {named} AND on_trace = 1 UNION ALL "
            "SELECT sp.span_trace AS target, s.total AS total, s.numbers AS numbers FROM "
            f"({on_records}) AS s INNER JOIN ({span_records(table, on_records)}) AS sp "
            "ON s.target = sp.span_id"
        )
        of_trace = (
            "SELECT r.id AS rid, s.total AS total, s.numbers AS numbers FROM (SELECT DISTINCT "
            f"id, trace_id FROM {items} WHERE {among} AND trace_id IN "
            f"(SELECT target FROM ({on_trace}))) AS r INNER JOIN ({on_trace}) AS s "
            "ON r.trace_id = s.target"
        )
        op = ">=" if test.kind == "min" else "<="
        params[f"sv{i}"] = float(test.value or 0)
        if traced:
            own = f"{own}{not_spans} UNION ALL {of_trace}"
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
    fields = ", ".join(SCORE_FIELDS)
    # A version that reads PENDING is summed under its record's time unless its (name,
    # record) has a pending sum: one stored before migration 42 (score_times.py).
    pending = (
        f"SELECT name, target FROM {sibling(table, SCORE_SUMS_BY_TIME.name)} WHERE "
        f"project = {{project:String}} AND on_trace = 0 AND record_at = {_PENDING} "
        f"AND target IN ({record_ids}) GROUP BY name, target HAVING sum(scores) > 0"
    )
    times = (
        "(SELECT CAST(mapFromArrays(groupArray(id), groupArray(at)), "
        "'Map(String, DateTime64(3, \\'UTC\\'))') FROM (SELECT id, min(created_at) AS at "
        f"FROM {sibling(table, REQUEST_IDS.name)} WHERE project = {{project:String}} "
        f"AND id IN ({record_ids}) GROUP BY id))"
    )
    summed_at = (
        f"if(s.record_at != {_PENDING} OR (s.name, s.request_id) IN ({pending}), "
        f"s.record_at, {times}[s.request_id])"
    )
    kept = ", ".join(
        "toUInt8(1)" if f == "is_deleted" else summed_at if f == "record_at" else f"s.{f}"
        for f in SCORE_FIELDS
    )
    sql = (
        f"INSERT INTO {table} (project, id, {fields}, written_at) "
        f"SELECT {{project:String}}, id, {kept}, now64(6) FROM ("
        f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {table} "
        f"WHERE project = {{project:String}} AND id IN (SELECT id FROM "
        f"{sibling(table, SCORES_BY_TARGET.name)} WHERE project = {{project:String}} AND target IN "
        f"({record_ids})) GROUP BY id) WHERE s.is_deleted = 0 AND s.request_id IN ({record_ids})"
    )
    return FIELD_REF.sub(lambda m: f"tupleElement(s, {SCORE_FIELDS.index(m[1]) + 1})", sql)


def record_scores_json(table: str) -> str:
    """SQL expression: the JSON array of a log row's scores (its own and its trace's, those
    on the trace's span records included), newest first, as score objects; over a table
    with ``id`` and ``trace_id``.

    The project's live scores are read once per query into a map, target -> [(time, JSON)]
    (a scalar subquery), which every exported row looks its record and trace up in.
    """
    fields = ", ".join(SCORE_FIELDS)
    obj = (
        "concat('{\"id\":', toJSONString(id), ',\"request_id\":', "
        "if(s.request_id = '', 'null', toJSONString(s.request_id)), ',\"trace_id\":', "
        "if(s.trace_id = '', 'null', toJSONString(s.trace_id)), "
        # An export's scores are its records' and their traces': never a session's.
        '\',"session_id":null,"name":\', '
        "toJSONString(s.name), ',\"data_type\":', toJSONString(toString(s.data_type)), "
        "',\"value\":', s.value, ',\"comment\":', "
        "if(isNull(s.comment), 'null', toJSONString(assumeNotNull(s.comment))), "
        "',\"correction\":', "
        "if(isNull(s.correction), 'null', toJSONString(assumeNotNull(s.correction))), "
        "',\"source\":', toJSONString(toString(s.source)), ',\"metadata\":', s.metadata, "
        "',\"created_at\":', "
        "toJSONString(formatDateTime(s.created_at, '%Y-%m-%dT%H:%i:%S.%fZ')), '}')"
    )
    # A score on a span record is its trace's (:func:`span_records`): keyed to the trace.
    live = (
        "SELECT if(s.request_id = '', concat('t:', s.trace_id), if(sp.span_trace != '', "
        f"concat('t:', sp.span_trace), concat('r:', s.request_id))) AS k, "
        f"(s.created_at, {obj}) AS o FROM (SELECT id, s, s.request_id AS rq FROM ("
        f"SELECT id, argMax(tuple({fields}), written_at) AS s FROM {table} "
        "WHERE project = {project:String} GROUP BY id) "
        "WHERE s.is_deleted = 0 AND s.session_id = '') AS l "
        f"LEFT JOIN ({span_records(table)}) AS sp ON l.rq = sp.span_id"
    )
    by_target = FIELD_REF.sub(
        lambda m: f"tupleElement(s, {SCORE_FIELDS.index(m[1]) + 1})",
        "(SELECT CAST(mapFromArrays(groupArray(k), groupArray(os)), "
        "'Map(String, Array(Tuple(DateTime64(3, \\'UTC\\'), String)))') "
        f"FROM (SELECT k, groupArray(o) AS os FROM ({live}) GROUP BY k))",
    )
    return (
        "concat('[', arrayStringConcat(arrayMap(x -> x.2, arrayReverseSort(x -> x.1, "
        f"arrayConcat({by_target}[concat('r:', id)], if(trace_id != '', "
        f"{by_target}[concat('t:', trace_id)], [])))), ','), ']')"
    )
