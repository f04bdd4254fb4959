"""Evaluation decisions: every SQL statement that writes or reads them (docs/api-notes.md,
"Online evaluation"; the table is described in :mod:`.tables`).

A list is newest ``decided_at`` first, then by target; the cursor is that position. It reads
candidates in time order and keeps each target's surviving decision (see :mod:`.tables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from ..schema import quote
from ..writes import WriteOutcome, direct_write
from .tables import EVALUATION_DECISION_TIMES, EVALUATION_DECISIONS, EVALUATION_WAITING

WAITING = "waiting"
# A final decision's row version is above every waiting one's (a waiting decision's version
# is its time in microseconds, far below 2**62 until the year 148,000).
_FINAL = 1 << 62
# The most candidates a page reads at a time (their targets are then resolved by key).
_MAX_BATCH = 2000
# Past this many candidates read for one page, the rest of the page is read from the
# decisions' own table instead (see DecisionStore.page).
_MAX_SCANNED = 4000


@dataclass(frozen=True)
class DecisionRow:
    """One decision of a rule on one target."""

    rule_id: str
    target_type: str
    target_id: str
    decision: str
    reason: str
    evaluator: str
    evaluator_version: int
    decided_at: datetime
    score_id: str | None = None
    judge_request_id: str | None = None
    cost_usd: float | None = None
    # A final decision written by a caller that read the target's decision before (the
    # worker): when the ``waiting`` one it replaces was decided, None when there is none.
    replaces_waiting: datetime | None = None


def row_version(decision: str, decided_at: datetime) -> int:
    """The version a decision's row is written with: later beats earlier, and a final
    decision beats every ``waiting`` one whatever their times (only ``waiting`` changes
    later)."""
    micros = int(decided_at.timestamp() * 1_000_000)
    return micros if decision == WAITING else _FINAL + micros


_COLUMNS = EVALUATION_DECISIONS.inserted_columns()
_WAITING_COLUMNS = EVALUATION_WAITING.inserted_columns()
_SELECT = (
    "rule_id, target_type, target_id, decision, reason, evaluator, evaluator_version, "
    "decided_at, score_id, judge_request_id, cost_usd"
)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class DecisionStore:
    """Writes and reads ``evaluation_decisions``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(EVALUATION_DECISIONS.name)}"
        self._times = f"{quote(database)}.{quote(EVALUATION_DECISION_TIMES.name)}"
        self._waiting = f"{quote(database)}.{quote(EVALUATION_WAITING.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    def append(
        self, project: str, rows: Sequence[DecisionRow], waiting_known: bool = False
    ) -> WriteOutcome:
        """Store decisions (each replaces its target's ``waiting`` one, or its older final
        one). Answers :data:`~..writes.STORED`, or :class:`~..writes.Refused` on an outage.

        A final decision replacing a ``waiting`` one ends it in ``evaluation_waiting`` too
        (see :mod:`.tables`). ``waiting_known``: each final row says which ``waiting`` one
        it replaces (``replaces_waiting``, the worker's, which read its targets' decisions
        before); else they are read here first.
        """
        return direct_write(lambda: self._insert(project, rows, waiting_known))

    def _insert(self, project: str, rows: Sequence[DecisionRow], waiting_known: bool) -> None:
        if not rows:
            return
        ended = _ended(rows) if waiting_known else self._waiting_of(project, rows)
        self._client.insert(
            self._table,
            [
                [
                    project,
                    d.rule_id,
                    d.target_type,
                    d.target_id,
                    d.decision,
                    d.reason,
                    d.evaluator,
                    d.evaluator_version,
                    d.score_id,
                    d.judge_request_id,
                    d.cost_usd,
                    d.decided_at,
                    row_version(d.decision, d.decided_at),
                ]
                for d in rows
            ],
            column_names=_COLUMNS,
            column_type_names=EVALUATION_DECISIONS.column_types(_COLUMNS),
            settings=self._write,
        )
        if ended:
            # After the decisions: cut short between the two, a waiting row stays listed
            # as a candidate, which the page finds replaced (never a live one hidden).
            self._client.insert(
                self._waiting,
                [[project, rule, at, tt, tid, 0, -1] for rule, tt, tid, at in sorted(ended)],
                column_names=_WAITING_COLUMNS,
                column_type_names=EVALUATION_WAITING.column_types(_WAITING_COLUMNS),
                settings=self._write,
            )

    def _waiting_of(
        self, project: str, rows: Sequence[DecisionRow]
    ) -> set[tuple[str, str, str, datetime]]:
        """(rule, target type, target id, decided_at) of the surviving ``waiting`` decision
        each final row of ``rows`` replaces, read from the store."""
        keys: dict[str, set[tuple[str, str]]] = {}
        for d in rows:
            if d.decision != WAITING:
                keys.setdefault(d.rule_id, set()).add((d.target_type, d.target_id))
        found: set[tuple[str, str, str, datetime]] = set()
        for rule_id, targets in keys.items():
            result = self._client.query(
                f"SELECT target_type, target_id, decision, decided_at FROM {self._table} FINAL "
                "WHERE project = {p:String} AND rule_id = {r:String} "
                "AND (target_type, target_id) IN {keys:Array(Tuple(String, String))}",
                parameters={"p": project, "r": rule_id, "keys": sorted(targets)},
                settings=self._read,
            )
            found.update(
                (rule_id, str(r[0]), str(r[1]), _utc(r[3]))
                for r in result.result_rows
                if r[2] == WAITING
            )
        return found

    def page(
        self,
        project: str,
        rule_id: str,
        decision: str | None,
        after: tuple[datetime, str, str] | None,
        limit: int,
    ) -> list[DecisionRow]:
        """Up to ``limit`` of a rule's decisions (``decision`` only, when given), newest
        first, after the position ``after`` (decided_at, target_type, target_id).

        Candidates are read from the time order (``evaluation_decision_times``) a batch at a
        time; each is kept when it is its target's surviving row (a ``waiting`` since replaced
        is not, and shows where its final decision was decided instead). When a page has read
        :data:`_MAX_SCANNED` candidates without filling up, the rest of it is read with
        ``FINAL`` over the whole rule: one bounded read instead of a walk through every
        replaced row. A page of ``decision=waiting`` reads its candidates from the waiting
        decisions not replaced instead (:meth:`_waiting_page`), never walking through the
        replaced ones.
        """
        if decision == WAITING:
            return self._waiting_page(project, rule_id, after, limit)
        found: list[DecisionRow] = []
        seen: set[tuple[str, str]] = set()
        batch = max(2 * limit, 100)
        scanned = 0
        while True:
            candidates = self._candidates(project, rule_id, decision, after, batch)
            scanned += len(candidates)
            live = self._surviving(project, rule_id, {(c[1], c[2]) for c in candidates})
            for _, target_type, target_id, version in candidates:
                key = (target_type, target_id)
                row = live.get(key)
                if row is None or key in seen or row[1] != version:
                    continue
                if decision is not None and row[0].decision != decision:
                    continue
                seen.add(key)
                found.append(row[0])
                if len(found) == limit:
                    return found
            if len(candidates) < batch:
                return found
            after = candidates[-1][:3]
            if scanned >= _MAX_SCANNED:
                # Every surviving row at or above ``after`` was among the candidates read.
                return found + self._rest(project, rule_id, decision, after, limit - len(found))
            # Most of that batch was replaced rows (``decision=waiting`` on a rule with a
            # delay: each waiting row is replaced by its final decision): read more at a time,
            # so a page costs a few reads, not one per hundred candidates (docs/benchmarks.md,
            # "Online evaluation").
            batch = min(4 * batch, _MAX_BATCH)

    def _candidates(
        self,
        project: str,
        rule_id: str,
        decision: str | None,
        after: tuple[datetime, str, str] | None,
        limit: int,
    ) -> list[tuple[datetime, str, str, int]]:
        where, params = _page_where(project, rule_id, decision, after, limit)
        result = self._client.query(
            f"SELECT decided_at, target_type, target_id, row_version FROM {self._times} "
            f"WHERE {where} "
            "ORDER BY decided_at DESC, target_type DESC, target_id DESC LIMIT {limit:UInt32}",
            parameters=params,
            settings=self._read,
        )
        return [(_utc(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in result.result_rows]

    def _waiting_page(
        self,
        project: str,
        rule_id: str,
        after: tuple[datetime, str, str] | None,
        limit: int,
    ) -> list[DecisionRow]:
        """:meth:`page` for ``decision=waiting``: its candidates are the rule's ``waiting``
        rows not replaced, read from ``evaluation_waiting`` (see :mod:`.tables`), each kept
        when it is still its target's surviving row."""
        found: list[DecisionRow] = []
        seen: set[tuple[str, str]] = set()
        # Nearly every row read is a live waiting decision: read a page's worth at first.
        batch = max(limit, 1)
        scanned = 0
        while True:
            rows = self._waiting_rows(project, rule_id, after, batch)
            scanned += len(rows)
            # Each position once (FINAL): a -1 left alone (a final decision whose waiting row
            # was never copied here) is no candidate.
            candidates = [(key, version) for key, version, sign in rows if sign > 0]
            live = self._surviving(project, rule_id, {key[1:] for key, _ in candidates})
            for key, version in candidates:
                row = live.get(key[1:])
                if row is None or key[1:] in seen or row[1] != version:
                    continue
                if row[0].decision != WAITING:
                    continue
                seen.add(key[1:])
                found.append(row[0])
                if len(found) == limit:
                    return found
            if len(rows) < batch:
                return found
            after = rows[-1][0]
            if scanned >= _MAX_SCANNED:
                # Rows left by writes cut short (never replaced here): read the rest as the
                # other pages do.
                return found + self._rest(project, rule_id, WAITING, after, limit - len(found))
            batch = min(4 * batch, _MAX_BATCH)

    def _waiting_rows(
        self, project: str, rule_id: str, after: tuple[datetime, str, str] | None, limit: int
    ) -> list[tuple[tuple[datetime, str, str], int, int]]:
        """Up to ``limit`` positions of ``evaluation_waiting`` below ``after``, newest first,
        each as (position, row version, sign), read with ``FINAL``: a waiting row and the -1
        of its replacement cancel in the read even before a merge drops them (read as rows,
        the pairs not merged yet cost a page as much as the walk this table ends)."""
        where, params = _page_where(project, rule_id, None, after, limit)
        result = self._client.query(
            f"SELECT decided_at, target_type, target_id, row_version, sign FROM {self._waiting} "
            f"FINAL WHERE {where} ORDER BY decided_at DESC, target_type DESC, target_id DESC "
            "LIMIT {limit:UInt32}",
            parameters=params,
            settings=self._read,
        )
        return [
            ((_utc(r[0]), str(r[1]), str(r[2])), int(r[3]), int(r[4])) for r in result.result_rows
        ]

    def _rest(
        self,
        project: str,
        rule_id: str,
        decision: str | None,
        after: tuple[datetime, str, str],
        limit: int,
    ) -> list[DecisionRow]:
        """Up to ``limit`` surviving decisions after ``after``, read with ``FINAL`` over the
        rule (the filter applies to each target's surviving row)."""
        where, params = _page_where(project, rule_id, decision, after, limit)
        result = self._client.query(
            f"SELECT {_SELECT} FROM {self._table} FINAL WHERE {where} "
            "ORDER BY decided_at DESC, target_type DESC, target_id DESC LIMIT {limit:UInt32}",
            parameters=params,
            settings=self._read,
        )
        return [_row(r) for r in result.result_rows]

    def _surviving(
        self, project: str, rule_id: str, keys: set[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[DecisionRow, int]]:
        """Each target's surviving decision and its row version, by (target_type, target_id)."""
        if not keys:
            return {}
        result = self._client.query(
            f"SELECT {_SELECT}, row_version FROM {self._table} FINAL "
            "WHERE project = {p:String} AND rule_id = {r:String} "
            "AND (target_type, target_id) IN {keys:Array(Tuple(String, String))}",
            parameters={"p": project, "r": rule_id, "keys": sorted(keys)},
            settings=self._read,
        )
        rows = {}
        for r in result.result_rows:
            row = _row(r)
            rows[(row.target_type, row.target_id)] = (row, int(r[11]))
        return rows

    def of_target(
        self, project: str, rule_id: str, target_type: str, target_id: str
    ) -> DecisionRow | None:
        """The surviving decision of a rule on one target, or None."""
        result = self._client.query(
            f"SELECT {_SELECT} FROM {self._table} FINAL WHERE project = {{p:String}} "
            "AND rule_id = {r:String} AND target_type = {tt:String} AND target_id = {tid:String}",
            parameters={"p": project, "r": rule_id, "tt": target_type, "tid": target_id},
            settings=self._read,
        )
        rows = result.result_rows
        return _row(rows[0]) if rows else None

    def counts(
        self, project: str, rule_ids: Sequence[str], since: timedelta
    ) -> dict[str, dict[str, int]]:
        """Per rule, how many targets' decisions of each kind were decided within ``since``
        of now.

        Read from the time order: each target decided in the window counts once, under its
        newest row there (a final decision outranks a ``waiting`` one, as in the decisions'
        own table). A ``waiting`` written after its target's final decision, which the table
        of decisions ignores, is counted as waiting if that final one is older than the window.
        """
        if not rule_ids:
            return {}
        result = self._client.query(
            "SELECT rule_id, decision, count() FROM ("
            "SELECT rule_id, argMax(decision, row_version) AS decision "
            f"FROM {self._times} WHERE project = {{p:String}} AND rule_id IN {{rs:Array(String)}} "
            "AND decided_at >= {since:DateTime64(6, 'UTC')} "
            "GROUP BY rule_id, target_type, target_id) GROUP BY rule_id, decision",
            parameters={"p": project, "rs": list(rule_ids), "since": datetime.now(UTC) - since},
            settings=self._read,
        )
        found: dict[str, dict[str, int]] = {}
        for rule_id, decision, count in result.result_rows:
            found.setdefault(str(rule_id), {})[str(decision)] = int(count)
        return found


def _page_where(
    project: str,
    rule_id: str,
    decision: str | None,
    after: tuple[datetime, str, str] | None,
    limit: int,
) -> tuple[str, dict[str, Any]]:
    """The conditions of a page's read (a rule, a kind, below a position) and their
    parameters, ``limit`` among them."""
    where = ["project = {p:String}", "rule_id = {r:String}"]
    params: dict[str, Any] = {"p": project, "r": rule_id, "limit": limit}
    if decision is not None:
        where.append("decision = {d:String}")
        params["d"] = decision
    if after is not None:
        where.append(
            "(decided_at, target_type, target_id) < "
            "({at:DateTime64(6, 'UTC')}, {tt:String}, {tid:String})"
        )
        params.update(at=after[0], tt=after[1], tid=after[2])
    return " AND ".join(where), params


def _row(r: Any) -> DecisionRow:
    return DecisionRow(
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


def _ended(rows: Sequence[DecisionRow]) -> set[tuple[str, str, str, datetime]]:
    """(rule, target type, target id, decided_at) of the ``waiting`` decisions the final
    rows of ``rows`` say they replace."""
    return {
        (d.rule_id, d.target_type, d.target_id, d.replaces_waiting)
        for d in rows
        if d.decision != WAITING and d.replaces_waiting is not None
    }
