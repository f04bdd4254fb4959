"""What every query of the prompt tables shares, and how a registry row reaches the store.

:class:`PromptStoreBase` holds the client (on the embedded store wrapped so that reads wait for
the registry journal), the tables' qualified names, the point-read settings, and the insert
plumbing: inline ``VALUES`` on the registry's own chDB handles (embedded) or the client's
insert (server), and the function the group commit (:mod:`.group_commit`) stores a batch
with. The reads (:mod:`.reads`) and the writes (:mod:`.writes`) build on it; ``PromptStore``
is both.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any, cast

from clickhouse_connect.driver.client import Client

from ..connection import close_client, open_client
from ..schema import Table, quote
from .group_commit import _Pending, _release_writes, _Settling, _writes_of
from .rows import _literal
from .tables import PROMPT_HEADS, PROMPT_LABELS, PROMPT_VERSIONS, PROMPTS

# chDB handles the registry's writes may hold open at once (embedded store).
_WRITE_HANDLES = 4


def _values(rows: list[list[Any]]) -> str:
    """Rows as the list after ``VALUES``, each value a literal."""
    return ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)


class PromptStoreBase:
    """The prompt store's client, table names and insert plumbing (see the module)."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        # On a cluster a compare-and-set read-back must see the insert it follows, whichever
        # replica answers: quorum inserts plus sequentially consistent reads give that.
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        # Point reads touch a few granules: one thread spares the engine a pipeline per core.
        self._point_read: dict[str, Any] = {"max_threads": 1}
        self._readback_settings: dict[str, Any] = {
            **self._point_read,
            **({"select_sequential_consistency": 1} if cluster else {}),
        }
        # In chDB this process is the only writer: slots are decided in memory and the rows of
        # every waiting writer go in one call (see _EmbeddedWrites).
        self._embedded = type(client).__name__ == "ChdbClient"
        self._handles: list[Client] = []
        self._handles_lock = threading.Lock()
        self._idle: queue.SimpleQueue[Client] = queue.SimpleQueue()
        db = quote(database)
        self._prompts = f"{db}.{quote(PROMPTS.name)}"
        self._versions = f"{db}.{quote(PROMPT_VERSIONS.name)}"
        self._heads = f"{db}.{quote(PROMPT_HEADS.name)}"
        self._labels = f"{db}.{quote(PROMPT_LABELS.name)}"
        self._targets = {
            table.name: f"{db}.{quote(table.name)}"
            for table in (PROMPTS, PROMPT_VERSIONS, PROMPT_LABELS)
        }
        self._database = database
        self._released = False
        self._writes = _writes_of(client.uri, database) if self._embedded else None
        if self._writes is not None and self._writes.journal is not None:
            self._client = cast(Client, _Settling(client, self._writes.journal.settle))
        # The list's heads: the view-fed table on a server; on the embedded store (migration 24
        # dropped the view there) each live prompt's newest version, read from the versions.
        self._heads_source = (
            f"(SELECT project, prompt_id, version, name, description, tags, folder, "
            f"prompt_created_at FROM {self._versions} WHERE project = {{project:String}} "
            "ORDER BY prompt_id, version DESC LIMIT 1 BY prompt_id)"
            if self._embedded
            else f"{self._heads} FINAL"
        )

    def _insert(self, table: Table, row: list[Any], settings: dict[str, Any]) -> None:
        if self._embedded:
            # One statement with the row inline: chDB's insert() stages the block in a file
            # first, and query parameters cost more than the parse of a literal row.
            token = settings.get("insert_deduplication_token")
            with self._handle() as client:
                client.command(
                    self._values_sql(table, [row], None if token is None else str(token))
                )
            return
        names = table.inserted_columns()
        self._client.insert(
            self._targets[table.name],
            [row],
            column_names=names,
            column_type_names=table.column_types(names),
            settings=settings,
        )

    def _values_sql(self, table: Table, rows: list[list[Any]], token: str | None = None) -> str:
        """An ``INSERT .. VALUES`` of ``rows`` written inline (embedded store)."""
        settings = (
            "" if token is None else f"SETTINGS insert_deduplication_token = {_literal(token)} "
        )
        return f"{self._insert_head(table)} {settings}VALUES {_values(rows)}"

    def _insert_head(self, table: Table) -> str:
        """``INSERT INTO <table> (<columns>)``: what precedes a ``VALUES`` list of its rows."""
        columns = ", ".join(quote(name) for name in table.inserted_columns())
        return f"INSERT INTO {self._targets[table.name]} ({columns})"

    def _store_batch(self, batch: list[_Pending]) -> None:
        """Journal the rows of every writer in ``batch`` by one append (applied in order right
        behind it, with the entries waiting beside it: one insert per table).

        Versions go first, then name claims, then labels: a claim is the commit point of its
        version, and a label points at a stored version. The journal keeps that order when
        it stores several entries together, and names each apply so that an entry applied
        again after a crash stores its rows once.
        """
        inserts = []
        for table in (PROMPT_VERSIONS, PROMPTS, PROMPT_LABELS):
            rows = [row for item in batch for row in item.rows.get(table.name, ())]
            if rows:
                inserts.append((self._insert_head(table), _values(rows)))
        if inserts:
            assert self._writes is not None and self._writes.journal is not None
            self._writes.journal.append_rows(inserts)

    def settle(self) -> None:
        """Return once every registry write acknowledged so far is in the store's tables (at
        once on a server, where writes are stored before they are acknowledged)."""
        if self._writes is not None and self._writes.journal is not None:
            self._writes.journal.settle()

    def _commit(self, pending: _Pending) -> None:
        assert self._writes is not None
        self._writes.commit(pending, self._store_batch)

    def _writes_barrier(self) -> None:
        assert self._writes is not None
        self._writes.barrier(self._store_batch)

    @contextlib.contextmanager
    def _handle(self) -> Iterator[Client]:
        """A chDB handle of the registry's own for one write (embedded store only).

        Each handle runs one call at a time; with the collector's one client every write (and
        every read) of the process would queue behind the one before it. Writers take an idle
        handle, or open one up to ``_WRITE_HANDLES``, or wait for one.
        """
        try:
            client = self._idle.get_nowait()
        except queue.Empty:
            with self._handles_lock:
                opening = len(self._handles) < _WRITE_HANDLES
                if opening:
                    client = open_client(self._client.uri)
                    self._handles.append(client)
            if not opening:
                client = self._idle.get()
        try:
            yield client
        finally:
            self._idle.put(client)

    def group_commits(self) -> tuple[int, int]:
        """(group commits that stored rows, writes they stored) on the embedded store so far,
        (0, 0) elsewhere (for tests and diagnostics)."""
        if self._writes is None:
            return 0, 0
        with self._writes.cond:
            return self._writes.commits, self._writes.committed

    def write_handles(self) -> list[Client]:
        """The clients the registry's writes use so far: the journal's (which applies group
        commits) and the handles opened for the others (for tests and diagnostics)."""
        applier = self._writes.applier if self._writes is not None else None
        with self._handles_lock:
            return [*([applier] if applier is not None else []), *self._handles]

    def close(self) -> None:
        """Close the handles the registry's writes opened (and let go of the slot table)."""
        with self._handles_lock:
            handles, self._handles = self._handles, []
            if self._writes is not None and not self._released:
                self._released = True
                _release_writes(self._client.uri, self._database)
        for client in handles:
            close_client(client)

    def _point_rows(self, sql: str, **parameters: Any) -> Sequence[Sequence[Any]]:
        """Run a point read (a few granules, one thread) and return its rows."""
        return self._client.query(sql, parameters=parameters, settings=self._point_read).result_rows
