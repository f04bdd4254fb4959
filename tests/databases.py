"""One migrated database per test process, emptied between tests instead of made anew.

A fresh database costs its migrations (every migration's DDL and mutations: 0.7-0.8 s of CPU
on this machine); emptying every table of a migrated one costs a few milliseconds. A test that
changes the schema (drops a column to play an upgrade, detaches a table to play an outage,
changes a table setting, rewrites the migrations' record) leaves a fingerprint that differs
from the migrated one: the database is then dropped and made again for the next test, so no
test sees another's schema or rows. It is made again as a copy of a template the process
migrated once (each table's and view's statement as the engine reports it, and the rows the
migrations seeded: ~0.15 s against 0.75 s); the tests of migrations themselves migrate
databases of their own (``fresh_settings``). The process's cache of checked keys is emptied
with the tables.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clickhouse_connect.driver._chdbclient import ChdbClient

from promptrail.collector.services.keys import KeyCache
from promptrail.collector.store.audit import chain_users
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.migrations import SCHEMA_MIGRATIONS, migrate
from promptrail.collector.store.prompts.group_commit import embedded_users

# A test's end reads, in one query, each table's name, engine, metadata file and whether it holds
# rows, with the migrations' record: the schema's fingerprint, and the tables the next test's
# start empties. Each table's metadata file holds its whole definition (columns, engine,
# settings): reading the files costs a few ms a test where asking for ``create_table_query``
# cost about 25 ms (the engine formats every statement anew), and a file is read again only when
# it was written since (``ReusableDatabase._definition``). A detached table leaves
# ``system.tables``. ``total_rows`` counts the rows of a MergeTree table's committed parts (from
# memory, no read); an engine that cannot say (NULL) is emptied anyway. One query where three
# were (the tables, the migrations' record, at the next start the tables holding rows).
_STATE = (
    "SELECT name, engine, metadata_path, total_rows IS NULL OR total_rows > 0, "
    "(SELECT arraySort(groupArray(version)) FROM `{db}`.`{migrations}` FINAL) "
    "FROM system.tables WHERE database = %(db)s ORDER BY name"
)
# A database's tables and views with the statement that makes each, in the order the engine
# lists them; a view comes after every table in copy_database.
_STATEMENTS = (
    "SELECT name, engine, create_table_query, total_rows FROM system.tables "
    "WHERE database = %(db)s ORDER BY name"
)
# The tables holding rows, where no test's end said (the first start after a failed check-in):
# emptying only those costs a TRUNCATE or a few for most tests, where emptying each of the ~27
# tables took about 1 ms apiece.
_HOLDING_ROWS = (
    "SELECT name FROM system.tables WHERE database = %(db)s AND engine != 'MaterializedView'"
    " AND name != %(migrations)s AND (total_rows IS NULL OR total_rows > 0)"
)


class ReusableDatabase:
    """A migrated database handed to one test at a time, empty each time."""

    def __init__(self, store_url: str, name: str) -> None:
        """Hold a client of the process's embedded store; migrate on first use."""
        self.name = name
        self._store_url = store_url
        # Where the embedded engine keeps its files; tables' metadata paths are relative to it.
        self._data_path = Path(store_url.removeprefix("chdb://"))
        self._client: Any = open_client(store_url)
        self._fingerprint: tuple[Any, ...] | None = None
        # The tables the last test left rows in, as its check-in found them (None: ask).
        self._holding: list[str] | None = None
        # Each table's statement as last read, with which file it was read from.
        self._statements: dict[str, tuple[tuple[int, int, int], str]] = {}
        # Migrated on the first checkout, never handed to a test: copied for each fresh start.
        self._template = f"{name}_template"
        self._template_made = False

    def checkout(self) -> str:
        """Return the database's name, migrated and with every table empty."""
        if self._fingerprint is None:
            self._client.command(f"DROP DATABASE IF EXISTS `{self.name}` SYNC")
            self.make_migrated(self.name)
            self._fingerprint = self._read_state()[0]
        else:
            holding = self._holding
            if holding is None:
                holding = [
                    table
                    for (table,) in self._client.query(
                        _HOLDING_ROWS,
                        parameters={"db": self.name, "migrations": SCHEMA_MIGRATIONS.name},
                    ).result_rows
                ]
            for table in holding:
                self._client.command(f"TRUNCATE TABLE `{self.name}`.`{table}` SYNC")
        # What the last check-in found is for this start only.
        self._holding = None
        # The keys checked by earlier tests' collectors are kept for the process's lifetime.
        KeyCache.shared(self._store_url, self.name).reset()
        return self.name

    def make_migrated(self, database: str) -> None:
        """Make ``database`` (new) as the migrations make it, from the process's template.

        For a fixture that keeps a database of its own (a module's collector, say): a copy
        costs ~0.15 s of CPU where migrating a fresh database cost ~0.75 s. Its owner drops it.
        """
        if not self._template_made:
            self._client.command(f"DROP DATABASE IF EXISTS `{self._template}` SYNC")
            migrate(self._client, self._template)
            self._template_made = True
        copy_database(self._client, self._template, database)

    def checkin(self) -> None:
        """Take the database back; a changed schema makes the next checkout migrate anew.

        Every collector a test opened on it must be closed by now: the registry's writers and
        the audit chain are shared per database while any user holds them, so one left open
        would carry the test's names and chain head into the next test's emptied database.
        """
        left_open = embedded_users(self._store_url, self.name) + chain_users(
            self._store_url, self.name
        )
        assert left_open == 0, "a collector (or store) the test opened was never closed"
        if self._fingerprint is None:
            return
        fingerprint, holding = self._read_state()
        if fingerprint != self._fingerprint:
            self._fingerprint = None
        else:
            self._holding = holding

    def close(self) -> None:
        """Drop the database and its template and close the client."""
        try:
            for database in (self.name, self._template):
                self._client.command(f"DROP DATABASE IF EXISTS `{database}` SYNC")
        finally:
            close_client(self._client)

    def _read_state(self) -> tuple[tuple[Any, ...], list[str]]:
        """The schema's fingerprint (each table's name, engine and statement, the migrations'
        versions) and the tables holding rows, from one query."""
        rows = self._client.query(
            _STATE.format(db=self.name, migrations=SCHEMA_MIGRATIONS.name),
            parameters={"db": self.name},
        ).result_rows
        tables = tuple(
            (name, engine, self._definition(name, path)) for name, engine, path, *_ in rows
        )
        versions = tuple(rows[0][4]) if rows else ()
        holding = [
            name
            for name, engine, _, rows_held, _ in rows
            if rows_held and engine != "MaterializedView" and name != SCHEMA_MIGRATIONS.name
        ]
        return (tables, versions), holding

    def _definition(self, table: str, metadata_path: str) -> str:
        """The table's statement as the engine stored it (a table without a file: nothing).

        Read only when its file is not the one last read (inode, modification time, size):
        the engine writes a changed statement to a new file renamed over the old one, and a
        test that makes the database again makes new files holding the same statements.
        """
        if not metadata_path:
            return ""
        path = self._data_path / metadata_path
        stat = path.stat()
        key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        known = self._statements.get(table)
        if known is not None and known[0] == key:
            return known[1]
        statement = path.read_text()
        self._statements[table] = (key, statement)
        return statement


def copy_database(client: Any, source: str, target: str) -> None:
    """Make ``target`` (new) a copy of ``source``: its tables, their rows, then its views.

    Every statement is the one the engine reports for the source (``SHOW CREATE``: columns,
    codecs, indexes, settings, a view's query), naming the target instead. The rows are copied
    before any view exists, so no view fills a table twice (a view's target is copied too).
    """
    (database,) = client.query(f"SHOW CREATE DATABASE `{source}`").result_rows[0]
    client.command(_renamed(str(database), source, target))
    tables = client.query(_STATEMENTS, parameters={"db": source}).result_rows
    for _, engine, statement, _ in tables:
        if engine != "MaterializedView":
            client.command(_renamed(str(statement), source, target))
    for name, engine, _, rows in tables:
        if engine != "MaterializedView" and (rows is None or rows > 0):
            client.command(f"INSERT INTO `{target}`.`{name}` SELECT * FROM `{source}`.`{name}`")
    for _, engine, statement, _ in tables:
        if engine == "MaterializedView":
            client.command(_renamed(str(statement), source, target))


def _renamed(statement: str, source: str, target: str) -> str:
    """``statement`` naming ``target`` wherever it names ``source`` (quoted or not): the
    template's name is unique to its process, so it appears nowhere else in its statements."""
    assert source.isidentifier() and target.isidentifier()
    return re.sub(rf"(?<![\w`]){source}(?![\w`])|`{source}`", f"`{target}`", statement)


def drop_database(store_url: str, database: str) -> None:
    """Drop a test's own database (one made fresh for it, not the reusable one) at its end."""
    client = open_client(store_url)
    try:
        client.command(f"DROP DATABASE IF EXISTS `{database}` SYNC")
    finally:
        client.close()


@contextmanager
def one_handshake_per_engine() -> Iterator[None]:
    """Let each embedded client after the first of its engine skip the driver's handshake.

    A new clickhouse-connect client asks the engine for its version, its time zone and every
    row of ``system.settings`` (about 1,900) before its first query: 15-25 ms on this machine,
    and a collector under test opens two clients, so about a tenth of a quick test's time.
    chDB runs one engine per process, whose answers are the same for every client of it: the
    first client of each (engine path, time zone source, initial settings) does the real
    handshake, and the later ones apply what it found exactly as the driver would have
    (``_apply_init_result``, which also makes each client's own setting writes). Only the
    in-process engine's clients: a ClickHouse server's, and every ``promptrail`` process the
    tests start, still do theirs. The wrap is checked: a driver that renamed these methods
    fails the run at its start instead of silently doing the handshake every time.
    """
    original: Callable[[ChdbClient, Any], None] = ChdbClient._init_common_settings
    assert callable(getattr(ChdbClient, "_apply_init_result", None)), "driver changed"
    found: dict[tuple[Any, ...], Any] = {}

    def init_common_settings(client: ChdbClient, tz_source: Any) -> None:
        key = (client.path, tz_source, repr(sorted((client._initial_settings or {}).items())))
        result = found.get(key)
        if result is not None:
            client._apply_init_result(result)
            return
        apply = client._apply_init_result

        def keep(result: Any) -> None:
            found[key] = result
            apply(result)

        client._apply_init_result = keep  # type: ignore[method-assign]
        try:
            original(client, tz_source)
        finally:
            del client._apply_init_result

    ChdbClient._init_common_settings = init_common_settings  # type: ignore[method-assign]
    try:
        yield
    finally:
        ChdbClient._init_common_settings = original  # type: ignore[method-assign]
