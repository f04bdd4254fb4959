"""The embedded store's group commit of registry writes.

On the embedded store this process is the only writer (chDB locks the data directory), so a
version number's or a name's slot is decided in memory (:class:`_EmbeddedWrites`, shared by
every store client of one database in the process) and the writes of every thread waiting are
stored together, one insert per table (the write path's :class:`..writes.group_commit.
LeaderCommit`): no deduplication token, no read-back. A group commit is kept by an append to
the database's registry journal and applied to chDB right behind it (see
:mod:`..writes.journal`): every read of the registry's tables waits for what was journaled
before it (:class:`_Settling`).

Apart from the queries because it is write machinery, not SQL: it knows rows only as lists by
table name, and stores a batch through the callable the store gives it
(``PromptStoreBase._store_batch`` in :mod:`.base`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from clickhouse_connect.driver.client import Client

from ..connection import close_client, open_client
from ..schema import quote
from ..writes.group_commit import LeaderCommit, Queued
from ..writes.journal import RegistryJournal
from .tables import PROMPT_LABELS, PROMPT_VERSIONS, PROMPTS

_K = TypeVar("_K")
_V = TypeVar("_V")
# Entries of the embedded slot table past which it is emptied (when no write is in flight):
# each is one prompt's newest number or one name's claim, reloaded from the store on next use.
_MAX_SLOTS = 500_000


@dataclass
class _Pending(Queued):
    """Rows of one writer waiting for the group commit, by table name."""

    rows: dict[str, list[list[Any]]]
    # The name claim the rows make (project, name), dropped from the slots if they fail.
    claim: tuple[str, str] | None = None


class _EmbeddedWrites:
    """The registry's writes of one embedded database in this process: which version numbers
    and name generations are taken (the slot table), and the group commit that stores them.

    The slot table replaces the compare-and-set's token and read-back there: a number or a
    claim is taken under :attr:`cond` from the exact state (what the store held when a key was
    first used, plus every write of this process since), and queued under the same lock, so
    rows reach the store in the order their slots were taken. A writer returns only once its
    rows are stored. Every store client of one database shares it (the tests' two service
    stacks), so it arbitrates between them as the table's tokens do between collectors.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        # (project, prompt_id) -> highest version number taken.
        self.versions: dict[tuple[str, str], int] = {}
        # (project, name) -> (highest generation claimed, whether that claim is live).
        self.names: dict[tuple[str, str], tuple[int, bool]] = {}
        self._group = LeaderCommit[_Pending](self.cond)
        # Store clients using the table. With one (the collector), a key it does not hold has
        # had no write since the table was made or trimmed, and that client's writers of a
        # name or prompt take turns and decide from what the store and its own writes say:
        # their choice is then taken as is, without reading the store.
        self.users = 0
        # Group commits that stored rows, and the writers' row sets they stored (diagnostics).
        self.commits = 0
        self.committed = 0
        # Where group commits are kept before chDB has them (opened with the first user).
        self.journal: RegistryJournal | None = None
        self.applier: Client | None = None

    def enqueue(self, pending: _Pending) -> _Pending:
        """Queue rows (holding :attr:`cond`, right after taking their slots)."""
        return self._group.enqueue(pending)

    def known(self, slots: dict[_K, _V], key: _K, assumed: _V, load: Callable[[], _V]) -> _V:
        """A slot's state (holding :attr:`cond`): as held, else what the sole store client
        ``assumed`` (see :attr:`users`), else as the store holds it (``load``).

        Past its bound the table is emptied first when no write is in flight: what it forgets
        is then read from the store, which holds it all.
        """
        if len(self.versions) + len(self.names) > _MAX_SLOTS and self._group.in_flight == 0:
            self.versions.clear()
            self.names.clear()
        state = slots.get(key)
        if state is None:
            state = assumed if self.users == 1 else load()
        return state

    def commit(self, pending: _Pending, run: Callable[[list[_Pending]], None]) -> None:
        """Return once ``pending`` is stored (with every writer queued with it, one insert
        per table: ``run(batch)``); raise what storing it raised."""
        self._group.commit(pending, run, self._settled)

    def _settled(self, batch: list[_Pending], error: BaseException | None) -> None:
        """Count a commit that stored rows; forget the name claims of one that failed."""
        stored = [item for item in batch if item.rows]
        if stored and error is None:
            self.commits += 1
            self.committed += len(stored)
        if error is not None:
            for item in batch:
                if item.claim is not None:
                    # Not live after all (or unknown): the store decides on the next use.
                    self.names.pop(item.claim, None)

    def barrier(self, run: Callable[[list[_Pending]], None]) -> None:
        """Return once every write queued before the call is stored."""
        with self.cond:
            pending = self.enqueue(_Pending({}))
        self.commit(pending, run)


# The slot tables of the embedded databases some open store client of this process uses: the
# last client to close drops its table, so a database emptied or made anew while no client had
# it open (the tests' databases) starts with slots read from the store.
_embedded_writes: dict[tuple[str, str], _EmbeddedWrites] = {}
_embedded_writes_lock = threading.Lock()


def _table_rank(head: str) -> int:
    """Where a table's insert goes when the journal stores several writes at once: versions,
    then name claims (the commit point of a create's version), then labels (which point at
    stored versions)."""
    for rank, table in enumerate((PROMPT_VERSIONS, PROMPTS, PROMPT_LABELS)):
        if f".{quote(table.name)} (" in head:
            return rank
    return 3


def journal_path(uri: str, database: str) -> Path:
    """Where the registry journal of an embedded database lives: beside the engine's files."""
    return Path(uri.removeprefix("chdb://")) / "registry-journal" / f"{database}.journal"


def _writes_of(uri: str, database: str) -> _EmbeddedWrites:
    """The process's :class:`_EmbeddedWrites` of one embedded database, for one more user.

    The first user opens the database's journal, which first applies whatever a process that
    ended before applying it left there.
    """
    with _embedded_writes_lock:
        writes = _embedded_writes.setdefault((uri, database), _EmbeddedWrites())
        if writes.journal is None:
            applier = open_client(uri)
            try:
                # Looked up at each call, so a client's command can be observed (tests).
                writes.journal = RegistryJournal(
                    journal_path(uri, database),
                    lambda statements: applier.command(statements),
                    rank=_table_rank,
                )
            except BaseException:
                close_client(applier)
                raise
            writes.applier = applier
        writes.users += 1
        return writes


def embedded_users(uri: str, database: str) -> int:
    """How many open store clients of this process share the database's registry writers
    (0 once every collector on it closed)."""
    with _embedded_writes_lock:
        writes = _embedded_writes.get((uri, database))
        return writes.users if writes is not None else 0


def _release_writes(uri: str, database: str) -> None:
    """One user of the database's :class:`_EmbeddedWrites` is done with it; the last one
    applies and closes its journal."""
    with _embedded_writes_lock:
        writes = _embedded_writes.get((uri, database))
        if writes is not None:
            writes.users -= 1
            if writes.users <= 0:
                del _embedded_writes[(uri, database)]
                if writes.journal is not None:
                    writes.journal.close()
                if writes.applier is not None:
                    close_client(writes.applier)


class _Settling:
    """A store client whose queries first wait for the registry journal (embedded store):
    a read of the registry's tables then sees every write acknowledged before it."""

    def __init__(self, client: Client, settle: Callable[[], None]) -> None:
        self._client = client
        self._settle = settle

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self._settle()
        return self._client.query(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
