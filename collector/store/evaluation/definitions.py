"""Evaluator versions and evaluation rules: every SQL statement that reads or writes them
(docs/api-notes.md, "Online evaluation"; the tables are described in :mod:`.tables`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from ..schema import quote
from ..writes import WriteOutcome, direct_write
from .tables import EVALUATION_RULES, EVALUATOR_VERSIONS


@dataclass(frozen=True)
class EvaluatorVersionRow:
    """One version of a named evaluator as stored."""

    name: str
    version: int
    definition: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class RuleRow:
    """One evaluation rule as stored: its fields (``spec``) and times."""

    id: str
    spec: dict[str, Any]
    created_at: datetime
    updated_at: datetime


_VERSION_COLUMNS = EVALUATOR_VERSIONS.inserted_columns()
_RULE_COLUMNS = EVALUATION_RULES.inserted_columns()


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class EvaluationStore:
    """Reads and writes ``evaluator_versions`` and ``evaluation_rules``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._versions = f"{db}.{quote(EVALUATOR_VERSIONS.name)}"
        self._rules = f"{db}.{quote(EVALUATION_RULES.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}
        # Reading the newest version and writing the next happen under one lock, so two PUTs
        # in this process never both write the same number (on a server shared by several
        # collectors, two PUTs of one name in the same instant may: the later row wins).
        self._lock = threading.Lock()

    # -- evaluators -------------------------------------------------------------------------

    def put_version(
        self,
        project: str,
        name: str,
        definition: dict[str, Any],
        same: Callable[[dict[str, Any]], bool],
    ) -> tuple[EvaluatorVersionRow, bool, WriteOutcome | None]:
        """Store ``definition`` as the next version of ``name`` unless ``same(newest)``.

        Returns the version that holds the definition, whether it was written now, and the
        write's outcome (None when nothing was written).
        """
        with self._lock:
            versions = self.versions(project, name)
            if versions and same(versions[0].definition):
                return versions[0], False, None
            row = EvaluatorVersionRow(
                name=name,
                version=(versions[0].version + 1) if versions else 1,
                definition=definition,
                created_at=_now_ms(),
            )
            outcome = direct_write(lambda: self._insert_version(project, row))
            return row, True, outcome

    def _insert_version(self, project: str, row: EvaluatorVersionRow) -> None:
        self._client.insert(
            self._versions,
            [[project, row.name, row.version, _json(row.definition), row.created_at]],
            column_names=_VERSION_COLUMNS,
            column_type_names=EVALUATOR_VERSIONS.column_types(_VERSION_COLUMNS),
            settings=self._write,
        )

    def versions(self, project: str, name: str) -> list[EvaluatorVersionRow]:
        """Every version of ``name``, newest first (none: no such evaluator)."""
        return self._read_versions(
            "project = {p:String} AND name = {n:String}", {"p": project, "n": name}
        )

    def newest_versions(self, project: str) -> list[EvaluatorVersionRow]:
        """The newest version of every evaluator of the project, by name."""
        result = self._client.query(
            "SELECT name, max(version) AS newest, argMax(definition, version), "
            f"argMax(created_at, version) FROM {self._versions} WHERE project = {{p:String}} "
            "GROUP BY name ORDER BY name",
            parameters={"p": project},
            settings=self._read,
        )
        return [_version_row(r) for r in result.result_rows]

    def first_created(self, project: str, names: list[str]) -> dict[str, datetime]:
        """When each of ``names`` got its first version."""
        if not names:
            return {}
        result = self._client.query(
            f"SELECT name, min(created_at) FROM {self._versions} WHERE project = {{p:String}} "
            "AND name IN {names:Array(String)} GROUP BY name",
            parameters={"p": project, "names": names},
            settings=self._read,
        )
        return {str(r[0]): _utc(r[1]) for r in result.result_rows}

    def _read_versions(self, where: str, params: dict[str, Any]) -> list[EvaluatorVersionRow]:
        result = self._client.query(
            f"SELECT name, version, definition, created_at FROM {self._versions} FINAL "
            f"WHERE {where} ORDER BY version DESC",
            parameters=params,
            settings=self._read,
        )
        return [_version_row(r) for r in result.result_rows]

    # -- rules ------------------------------------------------------------------------------

    def put_rule(self, project: str, rule: RuleRow, deleted: bool = False) -> WriteOutcome:
        """Store a rule (a new version of its id); ``deleted`` stores its tombstone. Answers
        :data:`~..writes.STORED`, or :class:`~..writes.Refused` on a store outage."""
        return direct_write(lambda: self._insert_rule(project, rule, deleted))

    def _insert_rule(self, project: str, rule: RuleRow, deleted: bool) -> None:
        self._client.insert(
            self._rules,
            [
                [
                    project,
                    rule.id,
                    str(rule.spec.get("name", "")),
                    _json(rule.spec),
                    rule.created_at,
                    rule.updated_at,
                    int(deleted),
                ]
            ],
            column_names=_RULE_COLUMNS,
            column_type_names=EVALUATION_RULES.column_types(_RULE_COLUMNS),
            settings=self._write,
        )

    def rule(self, project: str, rule_id: str) -> RuleRow | None:
        """The live rule ``rule_id``, or None."""
        rows = self._rules_where(project, "id = {id:String}", {"id": rule_id})
        return rows[0] if rows else None

    def rules(self, project: str, after: tuple[datetime, str] | None, limit: int) -> list[RuleRow]:
        """Up to ``limit`` live rules, newest first, after the position ``after``."""
        where, params = "1", {}
        if after is not None:
            where = "(created_at, id) < ({at:DateTime64(3, 'UTC')}, {aid:String})"
            params = {"at": after[0], "aid": after[1]}
        return self._rules_where(
            project,
            where,
            {**params, "limit": limit},
            tail=" ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
        )

    def _rules_where(
        self, project: str, where: str, params: dict[str, Any], tail: str = ""
    ) -> list[RuleRow]:
        result = self._client.query(
            f"SELECT id, spec, created_at, updated_at FROM {self._rules} FINAL "
            f"WHERE project = {{p:String}} AND is_deleted = 0 AND {where}{tail}",
            parameters={"p": project, **params},
            settings=self._read,
        )
        return [
            RuleRow(
                id=str(r[0]), spec=json.loads(r[1]), created_at=_utc(r[2]), updated_at=_utc(r[3])
            )
            for r in result.result_rows
        ]


def _version_row(r: Any) -> EvaluatorVersionRow:
    return EvaluatorVersionRow(
        name=str(r[0]), version=int(r[1]), definition=json.loads(r[2]), created_at=_utc(r[3])
    )


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
