"""Versioned, idempotent schema migrations recorded in ``schema_migrations``."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client

from .migration_steps import MIGRATIONS as MIGRATIONS  # where its callers and tests look it up
from .schema import DropView, EmbeddedSetting, Migration, Table, quote, render, render_database

logger = logging.getLogger("promptrail.store")

SCHEMA_MIGRATIONS = Table(
    name="schema_migrations",
    columns=("version UInt32", "name String", "applied_at DateTime64(3, 'UTC')"),
    engine="ReplacingMergeTree",
    order_by="version",
)


def migration_statements(
    migration: Migration, database: str, cluster: str | None, embedded: bool = False
) -> list[str]:
    """Render the DDL of one migration (``embedded``: for the embedded store)."""
    return [
        statement
        for obj in migration.objects
        if embedded or not _embedded_only(obj)
        for statement in render(obj, database, cluster)
    ]


def _embedded_only(obj: object) -> bool:
    return isinstance(obj, EmbeddedSetting) or (isinstance(obj, DropView) and obj.embedded_only)


# The statements whose mutation only rewrites the parts already stored (``MATERIALIZE COLUMN``
# or ``INDEX``; removing a dropped index's files) run it in the background, reads being right
# before it finishes (they compute the column from the others, or test the rows without the
# index, on parts not yet rewritten; docs/deploy.md), as a server runs ``MATERIALIZE`` by
# default. chDB waited for each (its ``mutations_sync`` and ``alter_sync`` are 1): a start-up's
# upgrade waited for every part to be rewritten, one mutation after another, and the engine
# took up the last parts of each up to a second late (its merge slots busy, it looks again
# 0.1-1.1 s later; docs/benchmarks.md, "The migrations' waits on the embedded store").
_REWRITE = re.compile(r"ALTER TABLE \S+ (ON CLUSTER \S+ )?(MATERIALIZE (COLUMN|INDEX)|DROP INDEX) ")
_IN_BACKGROUND = {"mutations_sync": 0, "alter_sync": 0}


def migrate(client: Client, database: str, cluster: str | None = None) -> list[int]:
    """Create the database and apply every migration not yet recorded; return those applied.

    Every statement is ``IF NOT EXISTS``, so collectors starting at once on one database
    may both run a step without harm.
    """
    client.command(render_database(database, cluster))
    for statement in render(SCHEMA_MIGRATIONS, database, cluster):
        client.command(statement)
    table = f"{quote(database)}.{quote(SCHEMA_MIGRATIONS.name)}"
    done = {int(r[0]) for r in client.query(f"SELECT version FROM {table}").result_rows}
    applied: list[int] = []
    embedded = type(client).__name__ == "ChdbClient"
    for migration in MIGRATIONS:
        if migration.version in done:
            continue
        for statement in migration_statements(migration, database, cluster, embedded):
            background = embedded and _REWRITE.match(statement)
            client.command(statement, settings=_IN_BACKGROUND if background else None)
        client.insert(
            table,
            [[migration.version, migration.name, datetime.now(UTC)]],
            column_names=["version", "name", "applied_at"],
        )
        logger.info("applied migration %d (%s) to %s", migration.version, migration.name, database)
        applied.append(migration.version)
    return applied
