"""The audit log (docs/security.md, "Audit log"): one hash-chained row per audited write.

Each row keeps the entry exactly as it was hashed (``entry``: its canonical JSON without
``hash``) and its ``hash``; the other columns repeat a few of the entry's fields so the list's
filters read columns, not JSON. ``seq`` numbers the chain from 1 with no gap: the order that
``verify`` walks. Rows are only inserted; nothing of the collector updates or deletes one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, quote
from .writes import WriteOutcome, direct_write

AUDIT_LOG = Table(
    name="audit_log",
    columns=(
        "seq UInt64",
        "id String",
        "at DateTime64(6, 'UTC')",
        "project String",
        "actor String",  # the actor's id (a user's or a key's), for the list's filter
        "resource_type LowCardinality(String)",
        "resource_id String",
        "entry String",  # canonical JSON of the entry without its hash (what was hashed)
        "hash String",
    ),
    order_by="seq",
)


@dataclass(frozen=True)
class AuditRow:
    """One stored entry: its place in the chain, its filter columns, its JSON and hash."""

    seq: int
    id: str
    at: datetime
    project: str
    actor: str
    resource_type: str
    resource_id: str
    entry: str
    hash: str


@dataclass(frozen=True)
class AuditFilter:
    """What the admin's list keeps (every field optional); ``before``: a cursor's seq."""

    project: str | None = None
    actor: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    before: int | None = None


_COLUMNS = ", ".join(c.split(" ", 1)[0] for c in AUDIT_LOG.columns)


class AuditStore:
    """Reads and appends ``audit_log``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(AUDIT_LOG.name)}"
        # On a cluster the next append must see this one, whichever replica answers it.
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read_settings: dict[str, Any] = (
            {"select_sequential_consistency": 1} if cluster else {}
        )

    @property
    def table(self) -> str:
        """The table's quoted name (the tests tamper with it directly)."""
        return self._table

    def head(self) -> tuple[int, str]:
        """The newest entry's seq and hash: ``(0, "")`` for an empty log."""
        rows = self._client.query(
            f"SELECT seq, hash FROM {self._table} ORDER BY seq DESC LIMIT 1",
            settings=self._read_settings,
        ).result_rows
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, "")

    def append(self, row: AuditRow) -> WriteOutcome:
        """Insert one entry; answers Stored or Refused (an outage) as a direct write does."""
        return direct_write(
            lambda: self._client.insert(
                self._table,
                [
                    [
                        row.seq,
                        row.id,
                        row.at,
                        row.project,
                        row.actor,
                        row.resource_type,
                        row.resource_id,
                        row.entry,
                        row.hash,
                    ]
                ],
                column_names=AUDIT_LOG.inserted_columns(),
                settings=self._write_settings,
            )
        )

    def page(self, where: AuditFilter, limit: int) -> list[AuditRow]:
        """Entries matching ``where``, newest first, at most ``limit``."""
        clauses: list[str] = []
        params: dict[str, Any] = {"limit": limit}
        for column, value in (
            ("project", where.project),
            ("actor", where.actor),
            ("resource_type", where.resource_type),
            ("resource_id", where.resource_id),
        ):
            if value is not None:
                clauses.append(f"{column} = {{{column}:String}}")
                params[column] = value
        if where.since is not None:
            clauses.append("at >= {since:DateTime64(6, 'UTC')}")
            params["since"] = where.since
        if where.until is not None:
            clauses.append("at < {until:DateTime64(6, 'UTC')}")
            params["until"] = where.until
        if where.before is not None:
            clauses.append("seq < {before:UInt64}")
            params["before"] = where.before
        condition = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        rows = self._client.query(
            f"SELECT {_COLUMNS} FROM {self._table} {condition}ORDER BY seq DESC "
            "LIMIT {limit:UInt32}",
            parameters=params,
            settings=self._read_settings,
        ).result_rows
        return [_row(r) for r in rows]

    def walk(self, batch: int = 5000) -> Iterator[AuditRow]:
        """Every entry in chain order (oldest first), read ``batch`` rows at a time."""
        after = -1
        while True:
            rows: Sequence[Sequence[Any]] = self._client.query(
                f"SELECT {_COLUMNS} FROM {self._table} WHERE seq > {{after:Int64}} "
                "ORDER BY seq LIMIT {batch:UInt32}",
                parameters={"after": after, "batch": batch},
                settings=self._read_settings,
            ).result_rows
            for r in rows:
                yield _row(r)
            if len(rows) < batch:
                return
            after = int(rows[-1][0])


def _row(r: Sequence[Any]) -> AuditRow:
    return AuditRow(
        seq=int(r[0]),
        id=str(r[1]),
        at=r[2],
        project=str(r[3]),
        actor=str(r[4]),
        resource_type=str(r[5]),
        resource_id=str(r[6]),
        entry=str(r[7]),
        hash=str(r[8]),
    )
