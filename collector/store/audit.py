"""The audit log (docs/security.md, "Audit log"): one hash-chained row per audited write.

Each row keeps the entry exactly as it was hashed (``entry``: its canonical JSON without
``hash``) and its ``hash``; the other columns repeat a few of the entry's fields so the list's
filters read columns, not JSON. ``seq`` numbers the chain from 1 with no gap: the order that
``verify`` walks. Rows are only inserted; nothing of the collector updates or deletes one.

The chain's head (the newest seq and hash) and the lock that serializes appends belong to the
database, not to one store object: every :class:`AuditStore` of one embedded database in this
process shares them (two apps on one data dir append to one chain). On the embedded store an
append is kept by the registry's kind of journal (a file append, ~20 µs, applied to chDB right
behind; ``writes/journal.py``) because a chDB insert writes a part (~5-15 ms); every read
first waits for what was journaled before it. On a server each append reads the head again
and inserts directly (docs/security.md says what that leaves open with several collectors).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from .connection import close_client, open_client
from .prompts.rows import _literal
from .schema import Table, quote
from .writes import WriteOutcome, direct_write
from .writes.journal import RegistryJournal
from .writes.outcomes import Refused

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
    # A journal entry applied again after a crash stores its row once.
    dedup=True,
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


@dataclass
class _Chain:
    """The head and the append lock of one database's chain (shared in the process)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    head: tuple[int, str] | None = None
    journal: RegistryJournal | None = None
    applier: Client | None = None
    users: int = 0


_chains: dict[tuple[str, str], _Chain] = {}
_chains_lock = threading.Lock()


def journal_path(uri: str, database: str) -> Path:
    """Where the audit journal of an embedded database lives: beside the engine's files."""
    return Path(uri.removeprefix("chdb://")) / "audit-journal" / f"{database}.journal"


class AuditStore:
    """Reads and appends ``audit_log``.

    ``uri``: the embedded store's ``chdb://`` address, whose chain and journal this store
    shares with every other of the process on that database; None (a server): a chain of its
    own, its head read again at every append.
    """

    def __init__(
        self, client: Client, database: str, cluster: str | None = None, uri: str | None = None
    ) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(AUDIT_LOG.name)}"
        # On a cluster the next append must see this one, whichever replica answers it.
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read_settings: dict[str, Any] = (
            {"select_sequential_consistency": 1} if cluster else {}
        )
        self._key: tuple[str, str] | None = None
        if uri is not None and uri.startswith("chdb://"):
            self._key = (uri, database)
            self._chain = _open_chain(uri, database)
        else:
            self._chain = _Chain()

    @property
    def table(self) -> str:
        """The table's quoted name (the tests tamper with it directly)."""
        return self._table

    @property
    def appends_in_memory(self) -> bool:
        """Whether an append now costs no store round trip (a journal and a known head): a
        caller on the event loop may then append without a hop to a worker thread."""
        return self._chain.journal is not None and self._chain.head is not None

    def settle(self) -> None:
        """Return once every append acknowledged so far is in the table."""
        if self._chain.journal is not None:
            self._chain.journal.settle()

    def close(self) -> None:
        """Done with the store: the last user of an embedded chain applies its journal."""
        key, self._key = self._key, None
        if key is not None:
            _release_chain(key)

    def head(self) -> tuple[int, str]:
        """The newest entry's seq and hash: ``(0, "")`` for an empty log."""
        self.settle()
        rows = self._client.query(
            f"SELECT seq, hash FROM {self._table} ORDER BY seq DESC LIMIT 1",
            settings=self._read_settings,
        ).result_rows
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, "")

    def append(self, make: Callable[[int, str], AuditRow]) -> AuditRow | Refused:
        """Append the entry ``make(seq, prev_hash)`` builds at the head of the chain.

        Serialized with every other append to this database's chain; ``prev_hash`` is "" for
        the first entry. Answers the row, or Refused when the store is out of reach (the
        chain then stays as it was).
        """
        chain = self._chain
        with chain.lock:
            if chain.head is None or chain.journal is None:
                chain.head = self.head()
            seq, prev = chain.head
            row = make(seq + 1, prev)
            outcome = self._write(row)
            if isinstance(outcome, Refused):
                return outcome
            chain.head = (row.seq, row.hash)
            return row

    def _write(self, row: AuditRow) -> WriteOutcome:
        values = [
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
        journal = self._chain.journal
        if journal is not None:
            columns = ", ".join(quote(c) for c in AUDIT_LOG.inserted_columns())
            literals = ", ".join(_literal(v) for v in values)
            # Rows, not a statement: the journal stores every entry waiting as one insert.
            head = f"INSERT INTO {self._table} ({columns})"
            return direct_write(lambda: journal.append_rows([(head, f"({literals})")]))
        return direct_write(
            lambda: self._client.insert(
                self._table,
                [values],
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
        self.settle()
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
        self.settle()
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


def _open_chain(uri: str, database: str) -> _Chain:
    """The process's chain of one embedded database, for one more user; the first opens the
    journal, which first applies what a process that ended before applying it left there."""
    with _chains_lock:
        chain = _chains.setdefault((uri, database), _Chain())
        if chain.journal is None:
            applier = open_client(uri)
            try:
                chain.journal = RegistryJournal(
                    journal_path(uri, database), lambda statements: applier.command(statements)
                )
            except BaseException:
                close_client(applier)
                raise
            chain.applier = applier
        chain.users += 1
        return chain


def chain_users(uri: str, database: str) -> int:
    """How many open audit stores of this process share the database's chain (0 once every
    collector on it closed)."""
    with _chains_lock:
        chain = _chains.get((uri, database))
        return chain.users if chain is not None else 0


def _release_chain(key: tuple[str, str]) -> None:
    with _chains_lock:
        chain = _chains.get(key)
        if chain is None:
            return
        chain.users -= 1
        if chain.users <= 0:
            del _chains[key]
            if chain.journal is not None:
                chain.journal.close()
            if chain.applier is not None:
                close_client(chain.applier)
