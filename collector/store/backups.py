"""Backups of the embedded store: ClickHouse's own ``BACKUP`` / ``RESTORE`` of the database.

Both run ``ASYNC`` and are watched in ``system.backups``: a long copy can report progress, and
the statement's own outcome (``BACKUP_CREATED``, ``RESTORE_FAILED`` with ClickHouse's error) is
read from there. A restore attaches the backed-up parts as they are: materialized views do not
fire, so the derived tables (the metadata and id indexes, the list copy, the rollup) come back
exactly as they were, never counted twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clickhouse_connect.driver.client import Client

from .migrations import SCHEMA_MIGRATIONS, migrate
from .schema import quote

RUNNING = ("CREATING_BACKUP", "RESTORING")
SUCCEEDED = ("BACKUP_CREATED", "RESTORED")


@dataclass(frozen=True)
class Operation:
    """The state of one BACKUP or RESTORE as ``system.backups`` reports it."""

    status: str
    error: str
    # Bytes the backup holds (known once ClickHouse has listed the parts) and, on a restore,
    # the bytes read back so far.
    total_bytes: int
    read_bytes: int

    @property
    def running(self) -> bool:
        """Whether the statement is still at work."""
        return self.status in RUNNING

    @property
    def succeeded(self) -> bool:
        """Whether the statement finished and its result is complete."""
        return self.status in SUCCEEDED


class BackupStore:
    """BACKUP and RESTORE of one database, and what a restore needs to know of the target."""

    def __init__(
        self, client: Client, database: str, settle: Callable[[], None] = lambda: None
    ) -> None:
        self._client = client
        self.database = database
        # Waits for the registry's journaled writes (store/registry_journal.py).
        self._settle = settle

    def also_settle(self, settle: Callable[[], None]) -> None:
        """Wait for ``settle`` too before a backup (another journal: the audit log's)."""
        first = self._settle

        def both() -> None:
            first()
            settle()

        self._settle = both

    def start_backup(self, path: Path) -> str:
        """Start copying the whole database into the directory ``path``; return the id.

        Every registry write and audit entry acknowledged before the call is in the copy.
        """
        self._settle()
        rows = self._client.query(
            f"BACKUP DATABASE {quote(self.database)} TO File({{path:String}}) ASYNC",
            parameters={"path": str(path)},
        ).result_rows
        return str(rows[0][0])

    def start_restore(self, path: Path, source: str) -> str:
        """Start restoring database ``source`` of the backup at ``path`` as this database."""
        rows = self._client.query(
            f"RESTORE DATABASE {quote(source)} AS {quote(self.database)} "
            "FROM File({path:String}) ASYNC",
            parameters={"path": str(path)},
        ).result_rows
        return str(rows[0][0])

    def operation(self, operation_id: str) -> Operation:
        """Return the state of a BACKUP or RESTORE started by this process."""
        rows = self._client.query(
            "SELECT toString(status), error, total_size, bytes_read FROM system.backups "
            "WHERE id = {id:String}",
            parameters={"id": operation_id},
        ).result_rows
        if not rows:
            return Operation("UNKNOWN", "no such backup operation", 0, 0)
        status, error, total, read = rows[0]
        return Operation(str(status), str(error), int(total), int(read))

    def stored_rows(self) -> int:
        """Count the rows the database holds (0 when it does not exist or was only migrated)."""
        rows = self._client.query(
            "SELECT sum(total_rows) FROM system.tables "
            "WHERE database = {db:String} AND name != {skip:String}",
            parameters={"db": self.database, "skip": SCHEMA_MIGRATIONS.name},
        ).result_rows
        return int(rows[0][0] or 0)

    def schema_version(self) -> int:
        """Return the newest schema migration applied to the database."""
        table = f"{quote(self.database)}.{quote(SCHEMA_MIGRATIONS.name)}"
        rows = self._client.query(f"SELECT max(version) FROM {table}").result_rows
        return int(rows[0][0] or 0)

    def migrate(self) -> None:
        """Apply the schema migrations the database lacks (a backup of an older promptrail)."""
        migrate(self._client, self.database)

    def drop(self) -> None:
        """Drop the database and everything in it."""
        self._client.command(f"DROP DATABASE IF EXISTS {quote(self.database)} SYNC")
