"""Provider connections (docs/api-notes.md, "Connections"): every SQL statement that reads or
writes them, and the month's spend of one, read from the request log.

A connection is only ever inserted: a change is a newer row of the same (project, name), a
delete a newer row with ``is_deleted = 1``; reads use ``FINAL``. Its secrets (the API key and
the header values) are stored sealed (AES-GCM, ``services/connections/sealing.py``): this
module never sees them in the clear. When a connection was last used is a row of its own
table, written at most once a minute per connection, as the API keys' last use is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .request_tables import REQUESTS
from .schema import Table, quote
from .writes import WriteOutcome, direct_write

CONNECTIONS = Table(
    name="provider_connections",
    columns=(
        "project String",
        "name String",
        "provider LowCardinality(String)",
        "base_url Nullable(String)",
        "models String",  # JSON array of model names
        "header_names String",  # JSON array: the names only; the values are in ``sealed``
        "api_key_hint String",
        "monthly_budget_usd Nullable(Float64)",
        "key_id String",  # which encryption key sealed ``sealed``
        "sealed String",  # AES-GCM of {"api_key", "headers"}: nonce and ciphertext, base64
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at", "is_deleted"),
    order_by="(project, name)",
)

CONNECTION_USAGE = Table(
    name="provider_connection_usage",
    columns=("project String", "name String", "last_used_at DateTime64(3, 'UTC')"),
    engine="ReplacingMergeTree",
    engine_args=("last_used_at",),
    order_by="(project, name)",
)

_COLUMNS = CONNECTIONS.inserted_columns()


@dataclass(frozen=True)
class ConnectionRow:
    """One connection as stored (its secrets sealed)."""

    name: str
    provider: str
    base_url: str | None
    models: tuple[str, ...]
    header_names: tuple[str, ...]
    api_key_hint: str
    monthly_budget_usd: float | None
    key_id: str
    sealed: str
    created_at: datetime
    updated_at: datetime


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class ConnectionStore:
    """Reads and writes ``provider_connections`` and their last use; sums their spend."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._table = f"{db}.{quote(CONNECTIONS.name)}"
        self._usage = f"{db}.{quote(CONNECTION_USAGE.name)}"
        self._requests = f"{db}.{quote(REQUESTS.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    def put(self, project: str, row: ConnectionRow, deleted: bool = False) -> WriteOutcome:
        """Store a connection (a newer row of its name); ``deleted`` stores its tombstone.
        Answers :data:`~.writes.STORED`, or :class:`~.writes.Refused` on a store outage."""
        return direct_write(lambda: self._put(project, [row], deleted))

    def put_many(self, rows: list[tuple[str, ConnectionRow]]) -> WriteOutcome:
        """Store newer rows of several connections of any projects (a key rotation)."""
        return direct_write(lambda: self._put_pairs(rows))

    def _put(self, project: str, rows: list[ConnectionRow], deleted: bool) -> None:
        self._put_pairs([(project, row) for row in rows], deleted)

    def _put_pairs(self, rows: list[tuple[str, ConnectionRow]], deleted: bool = False) -> None:
        written = datetime.now(UTC)
        self._client.insert(
            self._table,
            [
                [
                    project,
                    row.name,
                    row.provider,
                    row.base_url,
                    json.dumps(list(row.models)),
                    json.dumps(list(row.header_names)),
                    row.api_key_hint,
                    row.monthly_budget_usd,
                    row.key_id,
                    row.sealed,
                    row.created_at,
                    written,
                    int(deleted),
                ]
                for project, row in rows
            ],
            column_names=_COLUMNS,
            column_type_names=CONNECTIONS.column_types(_COLUMNS),
            settings=self._write,
        )

    def all(self, project: str | None) -> list[tuple[str, ConnectionRow]]:
        """Return the live connections of ``project`` (None: of every project), oldest first."""
        where = "is_deleted = 0" + ("" if project is None else " AND project = {p:String}")
        result = self._client.query(
            "SELECT project, name, provider, base_url, models, header_names, api_key_hint, "
            "monthly_budget_usd, key_id, sealed, created_at, updated_at "
            f"FROM {self._table} FINAL WHERE {where} ORDER BY created_at, name",
            parameters={"p": project or ""},
            settings=self._read,
        )
        return [
            (
                str(r[0]),
                ConnectionRow(
                    name=str(r[1]),
                    provider=str(r[2]),
                    base_url=r[3],
                    models=tuple(json.loads(r[4])),
                    header_names=tuple(json.loads(r[5])),
                    api_key_hint=str(r[6]),
                    monthly_budget_usd=None if r[7] is None else float(r[7]),
                    key_id=str(r[8]),
                    sealed=str(r[9]),
                    created_at=_utc(r[10]),
                    updated_at=_utc(r[11]),
                ),
            )
            for r in result.result_rows
        ]

    def used(self, project: str, name: str, at: datetime) -> WriteOutcome:
        """Record that the connection was used at ``at``."""
        return direct_write(
            lambda: self._client.insert(
                self._usage,
                [[project, name, at]],
                column_names=["project", "name", "last_used_at"],
                column_type_names=CONNECTION_USAGE.column_types(
                    ["project", "name", "last_used_at"]
                ),
                settings=self._write,
            )
        )

    def last_used(self, project: str) -> dict[str, datetime]:
        """Return when each connection of ``project`` was last used (the stored ones)."""
        result = self._client.query(
            f"SELECT name, max(last_used_at) FROM {self._usage} WHERE project = {{p:String}} "
            "GROUP BY name",
            parameters={"p": project},
            settings=self._read,
        )
        return {str(r[0]): _utc(r[1]) for r in result.result_rows}

    def spend(self, project: str, name: str, since: datetime) -> float:
        """Return the cost of the live records made through the connection since ``since``
        (the request log's own prices: each record's ``estimated_cost_usd``)."""
        result = self._client.query(
            f"SELECT sum(estimated_cost_usd) FROM {self._requests} FINAL "
            "WHERE project = {p:String} AND created_at >= {since:DateTime64(3, 'UTC')} "
            "AND metadata_map['connection'] = {n:String} AND is_deleted = 0",
            parameters={"p": project, "n": name, "since": since},
            settings=self._read,
        )
        rows = result.result_rows
        return float(rows[0][0] or 0.0) if rows else 0.0
