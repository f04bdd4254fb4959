"""The evaluation worker's store (docs/api-notes.md, "Online evaluation"): the request log in
the order records arrived, each rule's durable watermark in it, the records a batch judges,
the decisions a batch already has, a rule's spend today and a target's decisions.

- ``evaluation_arrivals``: one row per record stored in the request log of a project that has
  a rule (a view copies ``(project, now, id, created_at, trace_id, session_id)`` from each
  insert, so nothing in the write path changes), in arrival order within each project.
  Records of the service's own environments (``promptrail-…``: experiments, the playground,
  the judges' own calls) are left out, and so are tombstones. A retried copy of a record
  arrives again: the worker skips a target whose rule has already decided it finally.
- ``evaluation_watermarks``: per rule and stage (``seen``: waiting decisions written up to
  here; ``due``: final decisions written up to here), the position in the arrival order below
  which every record is decided. Advanced only after a batch's decisions are stored: a restart
  or a kill -9 resumes from it, and what it decides again it decides alike (same decision key,
  same score id).
- ``evaluation_decisions_by_target``: every decision row again (a view), sorted by target, so
  a record's detail reads its decisions by key (``evaluation_decisions`` is sorted by rule).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .evaluation import DecisionRow, RuleRow
from .evaluation.tables import EVALUATION_DECISIONS
from .request_filters import RESERVED_PREFIX
from .schema import AddColumn, AddIndex, Backfill, ModifyQuery, Table, View, quote

EVALUATION_ARRIVALS = Table(
    name="evaluation_arrivals",
    columns=(
        "project LowCardinality(String)",
        "arrived_at DateTime64(6, 'UTC')",
        "id String",
        "created_at DateTime64(3, 'UTC')",
        "trace_id String",
        # The record's metadata.session_id (migration 37; '' before it and without one).
        "session_id String DEFAULT ''",
    ),
    # A trace's or a session's last arrival is read by its id: the granules holding it.
    indexes=(
        "INDEX idx_trace trace_id TYPE bloom_filter GRANULARITY 1",
        "INDEX idx_session session_id TYPE bloom_filter GRANULARITY 1",
    ),
    order_by="(project, arrived_at, id)",
    # Positions older than a month are read only by a backfill, which reads the log itself.
    ttl="toDateTime(arrived_at) + INTERVAL 31 DAY",
    sharded=True,
    sharding_key="cityHash64(project, id)",
)

_ARRIVING = (
    "FROM {db}.requests{local} "
    f"WHERE is_deleted = 0 AND NOT startsWith(environment, '{RESERVED_PREFIX}')"
)

# The view as migration 36 made it, before arrivals carried their session; migration 37
# gives it the query below.
EVALUATION_ARRIVALS_MV_BEFORE_37 = View(
    name="evaluation_arrivals_mv",
    to_table="evaluation_arrivals",
    select=f"SELECT project, now64(6) AS arrived_at, id, created_at, trace_id {_ARRIVING}",
    sharded=True,
)

# The view as migration 37 made it, every record of every project; migration 53 gives it the
# query below.
EVALUATION_ARRIVALS_MV_BEFORE_53 = View(
    name="evaluation_arrivals_mv",
    to_table="evaluation_arrivals",
    select=(
        "SELECT project, now64(6) AS arrived_at, id, created_at, trace_id, "
        f"metadata_map['session_id'] AS session_id {_ARRIVING}"
    ),
    sharded=True,
)

# Arrivals of the projects that have a rule (migration 53): only the worker reads them, and it
# reads a project's only after each rule's creation, so a project without rules (most of them)
# no longer pays a copy of each record it logs. The rules' table is small and the same on every
# replica; a project whose rules were all deleted keeps arriving until their rows merge away.
# A record stored in the same instant as its project's first rule may or may not arrive (and
# be judged): it arrived while the rule was being made.
RULED_PROJECTS = "project IN (SELECT project FROM {db}.evaluation_rules)"

EVALUATION_ARRIVALS_MV = replace(
    EVALUATION_ARRIVALS_MV_BEFORE_53,
    select=f"{EVALUATION_ARRIVALS_MV_BEFORE_53.select} AND {RULED_PROJECTS}",
)

EVALUATION_WATERMARKS = Table(
    name="evaluation_watermarks",
    columns=(
        "project String",
        "rule_id String",
        "stage LowCardinality(String)",  # seen | due
        "arrived_at DateTime64(6, 'UTC')",
        "id String",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, rule_id, stage)",
)

EVALUATION_DECISIONS_BY_TARGET = Table(
    name="evaluation_decisions_by_target",
    columns=EVALUATION_DECISIONS.columns,
    engine="ReplacingMergeTree",
    engine_args=("row_version",),
    order_by="(project, target_type, target_id, rule_id)",
)

EVALUATION_DECISIONS_BY_TARGET_MV = View(
    name="evaluation_decisions_by_target_mv",
    to_table="evaluation_decisions_by_target",
    select="SELECT * FROM {db}.evaluation_decisions",
)

EVALUATION_WORK = (
    EVALUATION_ARRIVALS,
    EVALUATION_ARRIVALS_MV_BEFORE_37,
    EVALUATION_WATERMARKS,
    EVALUATION_DECISIONS_BY_TARGET,
    EVALUATION_DECISIONS_BY_TARGET_MV,
    Backfill(EVALUATION_DECISIONS_BY_TARGET_MV, EVALUATION_DECISIONS_BY_TARGET),
)

# The arrivals' sessions (migration 37): the worker reads a session's arrivals as a trace's.
ARRIVAL_SESSIONS = (
    AddColumn(EVALUATION_ARRIVALS, "session_id"),
    AddIndex(EVALUATION_ARRIVALS, "idx_session"),
    ModifyQuery(EVALUATION_ARRIVALS_MV_BEFORE_53),
)

Position = tuple[datetime, str]
"""A place in a project's arrival order: (arrived_at, record id)."""


@dataclass(frozen=True)
class Arrival:
    """A record as it arrived."""

    arrived_at: datetime
    id: str
    created_at: datetime
    trace_id: str = ""
    session_id: str = ""


@dataclass(frozen=True)
class Candidate:
    """What a rule's filter and mapping read of a record."""

    id: str
    created_at: datetime
    prompt_name: str
    version: int
    model: str
    kind: str
    status: str
    span_name: str
    input: Any
    input_variables: dict[str, Any]
    output: dict[str, Any]
    metadata: dict[str, Any]
    trace_id: str = ""
    parent_span_id: str = ""


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _json(text: str, empty: Any) -> Any:
    if not text:
        return empty
    try:
        return json.loads(text)
    except ValueError:
        return empty


# A backfill's window over the log (parameters p, since and until).
_WINDOW = (
    "project = {p:String} AND created_at >= {since:DateTime64(3, 'UTC')} "
    "AND created_at < {until:DateTime64(3, 'UTC')} AND is_deleted = 0 "
    f"AND NOT startsWith(environment, '{RESERVED_PREFIX}')"
)
# A record's trace or session, as the worker keys them.
_THREAD_OF = {"trace_id": "trace_id", "session_id": "metadata_map['session_id']"}

_DECISION_SELECT = (
    "rule_id, target_type, target_id, decision, reason, evaluator, evaluator_version, "
    "decided_at, score_id, judge_request_id, cost_usd"
)


class EvaluationWorkStore:
    """The reads and writes of the evaluation worker, its backfills and the details."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._arrivals = f"{db}.{quote(EVALUATION_ARRIVALS.name)}"
        self._marks = f"{db}.{quote(EVALUATION_WATERMARKS.name)}"
        self._by_target = f"{db}.{quote(EVALUATION_DECISIONS_BY_TARGET.name)}"
        self._decisions = f"{db}.{quote(EVALUATION_DECISIONS.name)}"
        self._rules = f"{db}.{quote('evaluation_rules')}"
        self._requests = f"{db}.{quote('requests')}"
        self._threads = f"{db}.{quote('thread_items')}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    # -- rules ------------------------------------------------------------------------------

    def live_rules(self) -> list[tuple[str, RuleRow]]:
        """Every live rule of every project, as (project, rule)."""
        result = self._client.query(
            f"SELECT project, id, spec, created_at, updated_at FROM {self._rules} FINAL "
            "WHERE is_deleted = 0 ORDER BY project, created_at, id",
            settings=self._read,
        )
        return [
            (str(r[0]), RuleRow(str(r[1]), json.loads(r[2]), _utc(r[3]), _utc(r[4])))
            for r in result.result_rows
        ]

    def live_rule_ids(self, project: str, rule_ids: Sequence[str]) -> set[str]:
        """Which of ``rule_ids`` are live rules of the project."""
        if not rule_ids:
            return set()
        result = self._client.query(
            f"SELECT id FROM {self._rules} FINAL WHERE project = {{p:String}} "
            "AND id IN {ids:Array(String)} AND is_deleted = 0",
            parameters={"p": project, "ids": list(rule_ids)},
            settings=self._read,
        )
        return {str(r[0]) for r in result.result_rows}

    # -- arrivals and records ---------------------------------------------------------------

    def arrivals(self, project: str, after: Position, until: datetime, limit: int) -> list[Arrival]:
        """Up to ``limit`` records of the project that arrived after ``after`` and no later
        than ``until``, in arrival order."""
        result = self._client.query(
            f"SELECT arrived_at, id, created_at, trace_id, session_id FROM {self._arrivals} "
            "WHERE project = {p:String} AND arrived_at <= {until:DateTime64(6, 'UTC')} "
            "AND (arrived_at, id) > ({at:DateTime64(6, 'UTC')}, {id:String}) "
            "ORDER BY arrived_at, id LIMIT {limit:UInt32}",
            parameters={
                "p": project,
                "until": until,
                "at": after[0],
                "id": after[1],
                "limit": limit,
            },
            settings=self._read,
        )
        return [
            Arrival(_utc(r[0]), str(r[1]), _utc(r[2]), str(r[3]), str(r[4]))
            for r in result.result_rows
        ]

    def last_arrivals(
        self, project: str, ids: Sequence[str], key: str = "trace_id"
    ) -> dict[str, datetime]:
        """When each trace's (``key`` 'trace_id') or session's ('session_id') newest record
        arrived."""
        if not ids:
            return {}
        column = {"trace_id": "trace_id", "session_id": "session_id"}[key]
        result = self._client.query(
            f"SELECT {column}, max(arrived_at) FROM {self._arrivals} "
            f"WHERE project = {{p:String}} AND {column} IN {{ids:Array(String)}} "
            f"GROUP BY {column}",
            parameters={"p": project, "ids": list(ids)},
            settings=self._read,
        )
        return {str(r[0]): _utc(r[1]) for r in result.result_rows}

    def created_between(
        self, project: str, since: datetime, until: datetime, after: str, limit: int
    ) -> list[tuple[datetime, str]]:
        """Up to ``limit`` live records of the project created in [since, until) (the
        service's own environments left out), by id after ``after``: a backfill's window."""
        result = self._client.query(
            f"SELECT created_at, id FROM {self._requests} FINAL WHERE project = {{p:String}} "
            "AND created_at >= {since:DateTime64(3, 'UTC')} "
            "AND created_at < {until:DateTime64(3, 'UTC')} AND is_deleted = 0 "
            f"AND NOT startsWith(environment, '{RESERVED_PREFIX}') AND id > {{after:String}} "
            "ORDER BY id LIMIT {limit:UInt32}",
            parameters={
                "p": project,
                "since": since,
                "until": until,
                "after": after,
                "limit": limit,
            },
            settings=self._read,
        )
        return [(_utc(r[0]), str(r[1])) for r in result.result_rows]

    def count_between(self, project: str, since: datetime, until: datetime) -> int:
        """How many live records of the project were created in [since, until)."""
        result = self._client.query(
            f"SELECT count() FROM {self._requests} FINAL WHERE project = {{p:String}} "
            "AND created_at >= {since:DateTime64(3, 'UTC')} "
            "AND created_at < {until:DateTime64(3, 'UTC')} AND is_deleted = 0 "
            f"AND NOT startsWith(environment, '{RESERVED_PREFIX}')",
            parameters={"p": project, "since": since, "until": until},
            settings=self._read,
        )
        return int(result.result_rows[0][0])

    def threads_between(
        self, project: str, key: str, since: datetime, until: datetime, after: str, limit: int
    ) -> list[str]:
        """Up to ``limit`` traces (``key`` 'trace_id') or sessions ('session_id') with a live
        record of the project created in [since, until) (the service's own environments
        left out), by id after ``after``: a trace or session rule's backfill window."""
        result = self._client.query(
            f"SELECT DISTINCT {_THREAD_OF[key]} AS thread FROM {self._requests} FINAL "
            f"WHERE {_WINDOW} AND thread != '' AND thread > {{after:String}} "
            "ORDER BY thread LIMIT {limit:UInt32}",
            parameters={
                "p": project,
                "since": since,
                "until": until,
                "after": after,
                "limit": limit,
            },
            settings=self._read,
        )
        return [str(r[0]) for r in result.result_rows]

    def count_threads_between(
        self, project: str, key: str, since: datetime, until: datetime
    ) -> int:
        """How many traces or sessions :meth:`threads_between` finds in the window."""
        result = self._client.query(
            f"SELECT uniqExact(thread) FROM (SELECT {_THREAD_OF[key]} AS thread "
            f"FROM {self._requests} FINAL WHERE {_WINDOW} AND thread != '')",
            parameters={"p": project, "since": since, "until": until},
            settings=self._read,
        )
        return int(result.result_rows[0][0])

    def candidates(self, project: str, keys: Sequence[tuple[datetime, str]]) -> list[Candidate]:
        """The live records of ``keys`` (created_at, id), with what rules read of them."""
        if not keys:
            return []
        return self._candidates(
            "created_at IN {ats:Array(DateTime64(3, 'UTC'))} AND id IN {ids:Array(String)}",
            {
                "p": project,
                "ats": sorted({k[0] for k in keys}),
                "ids": sorted({k[1] for k in keys}),
            },
        )

    def trace_candidates(self, project: str, trace_ids: Sequence[str]) -> list[Candidate]:
        """Every live record of the traces ``trace_ids``."""
        if not trace_ids:
            return []
        return self._candidates(
            "trace_id IN {ids:Array(String)}", {"p": project, "ids": sorted(set(trace_ids))}
        )

    def session_candidates(
        self, project: str, session_ids: Sequence[str]
    ) -> dict[str, list[Candidate]]:
        """Every live record of the sessions ``session_ids`` (their metadata.session_id), by
        session: their keys from each session's range of ``thread_items``, then the records."""
        if not session_ids:
            return {}
        rows = self._client.query(
            f"SELECT DISTINCT value, created_at, id FROM {self._threads} "
            "WHERE project = {p:String} AND key = 'session_id' "
            "AND value IN {ids:Array(String)}",
            parameters={"p": project, "ids": sorted(set(session_ids))},
            settings=self._read,
        ).result_rows
        session_of = {str(r[2]): str(r[0]) for r in rows}
        found: dict[str, list[Candidate]] = {}
        for record in self.candidates(project, [(_utc(r[1]), str(r[2])) for r in rows]):
            found.setdefault(session_of[record.id], []).append(record)
        return found

    def _candidates(self, where: str, params: dict[str, Any]) -> list[Candidate]:
        result = self._client.query(
            "SELECT id, created_at, prompt_name, version, model, kind, toString(status), "
            "span_name, input, input_variables, output, metadata, trace_id, parent_span_id "
            f"FROM {self._requests} FINAL WHERE project = {{p:String}} AND {where} "
            f"AND is_deleted = 0 AND NOT startsWith(environment, '{RESERVED_PREFIX}')",
            parameters=params,
            settings=self._read,
        )
        return [
            Candidate(
                id=str(r[0]),
                created_at=_utc(r[1]),
                prompt_name=str(r[2]),
                version=int(r[3]),
                model=str(r[4]),
                kind=str(r[5]),
                status=str(r[6]),
                span_name=str(r[7]),
                input=_json(r[8], None),
                input_variables=_json(r[9], {}) or {},
                output=_json(r[10], {}) or {},
                metadata=_json(r[11], {}) or {},
                trace_id=str(r[12]),
                parent_span_id=str(r[13]),
            )
            for r in result.result_rows
        ]

    # -- decisions --------------------------------------------------------------------------

    def decided(
        self, project: str, rule_id: str, target_type: str, target_ids: Sequence[str]
    ) -> dict[str, tuple[str, datetime]]:
        """The surviving decision of the rule on each of ``target_ids`` that has one, and
        when it was decided."""
        if not target_ids:
            return {}
        result = self._client.query(
            f"SELECT target_id, decision, decided_at FROM {self._decisions} FINAL "
            "WHERE project = {p:String} AND rule_id = {r:String} AND target_type = {tt:String} "
            "AND target_id IN {ids:Array(String)}",
            parameters={"p": project, "r": rule_id, "tt": target_type, "ids": list(target_ids)},
            settings=self._read,
        )
        return {str(r[0]): (str(r[1]), _utc(r[2])) for r in result.result_rows}

    def of_target(self, project: str, target_type: str, target_id: str) -> list[DecisionRow]:
        """Every rule's surviving decision on one target, oldest rule decision first."""
        result = self._client.query(
            f"SELECT {_DECISION_SELECT} FROM {self._by_target} FINAL "
            "WHERE project = {p:String} AND target_type = {tt:String} "
            "AND target_id = {tid:String} ORDER BY decided_at, rule_id",
            parameters={"p": project, "tt": target_type, "tid": target_id},
            settings=self._read,
        )
        return [
            DecisionRow(
                rule_id=str(r[0]),
                target_type=str(r[1]),
                target_id=str(r[2]),
                decision=str(r[3]),
                reason=str(r[4]),
                evaluator=str(r[5]),
                evaluator_version=int(r[6]),
                decided_at=_utc(r[7]),
                score_id=r[8],
                judge_request_id=r[9],
                cost_usd=None if r[10] is None else float(r[10]),
            )
            for r in result.result_rows
        ]

    # -- watermarks -------------------------------------------------------------------------

    def watermarks(self, project: str, rule_id: str) -> dict[str, Position]:
        """The rule's stored watermarks by stage."""
        result = self._client.query(
            f"SELECT stage, arrived_at, id FROM {self._marks} FINAL "
            "WHERE project = {p:String} AND rule_id = {r:String}",
            parameters={"p": project, "r": rule_id},
            settings=self._read,
        )
        return {str(r[0]): (_utc(r[1]), str(r[2])) for r in result.result_rows}

    def advance(self, project: str, rule_id: str, stage: str, position: Position) -> None:
        """Store the rule's new watermark for ``stage``."""
        self.advance_many(project, [(rule_id, stage, position)])

    def advance_many(self, project: str, marks: Sequence[tuple[str, str, Position]]) -> None:
        """Store new watermarks, each ``(rule_id, stage, position)``, in one insert (a
        worker's pass moves every rule it decided for at once)."""
        if not marks:
            return
        now = datetime.now(UTC)
        self._client.insert(
            self._marks,
            [[project, rule, stage, at, last, now] for rule, stage, (at, last) in marks],
            column_names=EVALUATION_WATERMARKS.inserted_columns(),
            column_type_names=EVALUATION_WATERMARKS.column_types(
                EVALUATION_WATERMARKS.inserted_columns()
            ),
            settings=self._write,
        )

    # -- spend ------------------------------------------------------------------------------

    def spend(self, project: str, rule_id: str, since: datetime) -> float:
        """The cost of the rule's judge calls since ``since`` (each judge record's own
        ``estimated_cost_usd``)."""
        result = self._client.query(
            f"SELECT sum(estimated_cost_usd) FROM {self._requests} FINAL "
            "WHERE project = {p:String} AND created_at >= {since:DateTime64(3, 'UTC')} "
            "AND environment = 'promptrail-evaluation' "
            "AND metadata_map['rule_id'] = {r:String} AND is_deleted = 0",
            parameters={"p": project, "r": rule_id, "since": since},
            settings=self._read,
        )
        rows = result.result_rows
        return float(rows[0][0] or 0.0) if rows else 0.0
