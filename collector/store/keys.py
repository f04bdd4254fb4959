"""API keys: stored only as SHA-256 hashes, one project per key."""

from __future__ import annotations

from datetime import datetime

from clickhouse_connect.driver.client import Client

from .schema import Table, quote

# Point lookups by hash on every request: the hash leads the sort key.
API_KEYS = Table(
    name="api_keys",
    columns=(
        "key_hash String",
        "project String",
        "key_prefix String",
        "created_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    order_by="key_hash",
)


class KeyStore:
    """Reads and writes ``api_keys``."""

    def __init__(self, client: Client, database: str) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(API_KEYS.name)}"

    def insert(self, key_hash: str, project: str, key_prefix: str, created_at: datetime) -> None:
        """Store one key hash for a project."""
        self._client.insert(
            self._table,
            [[key_hash, project, key_prefix, created_at]],
            column_names=["key_hash", "project", "key_prefix", "created_at"],
        )

    def project_of(self, key_hash: str) -> str | None:
        """Return the project owning this key hash, or None."""
        rows = self._client.query(
            f"SELECT project FROM {self._table} WHERE key_hash = {{h:String}} LIMIT 1",
            parameters={"h": key_hash},
        ).result_rows
        return str(rows[0][0]) if rows else None

    def count_for(self, project: str) -> int:
        """Count the keys of a project."""
        rows = self._client.query(
            f"SELECT count() FROM {self._table} WHERE project = {{p:String}}",
            parameters={"p": project},
        ).result_rows
        return int(rows[0][0])
