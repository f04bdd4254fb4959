"""The prompt registry on ClickHouse: names, immutable versions, heads and labels.

Writes never update in place. A create or a new version is an insert whose
``insert_deduplication_token`` names the slot it claims (a name's generation, a prompt's
version number): ClickHouse keeps only the first insert per token, so reading the slot back
tells the writer whether it won. That is a compare-and-set without transactions, and it holds
across collectors because the dedup log lives with the table (in Keeper on a cluster).

On the embedded store this process is the only writer (chDB locks the data directory), so the
slots are decided in memory instead (:class:`_EmbeddedWrites`, shared by every store client of
one database in the process) and the writes of every thread waiting are stored together, one
insert per table (a group commit): no token, no read-back. A group commit is kept by an append
to the database's registry journal and applied to chDB right behind it (see
:mod:`.registry_journal`): every read of these tables waits for what was journaled before it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from clickhouse_connect.driver.client import Client

from .connection import close_client, open_client, utc
from .registry_journal import RegistryJournal
from .schema import Table, View, quote

_K = TypeVar("_K")
_V = TypeVar("_V")
# Entries of the embedded slot table past which it is emptied (when no write is in flight):
# each is one prompt's newest number or one name's claim, reloaded from the store on next use.
_MAX_SLOTS = 500_000


def _literal(value: Any) -> str:
    """A value as a ClickHouse literal of a ``VALUES`` row (strings, ints, string arrays, UTC
    datetimes). Inline rows parse at a fraction of the cost of query parameters in chDB (a
    one-row insert 4.8 ms against 8.5, docs/architecture.md)."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0") + "'"
    if isinstance(value, bool | int):
        return str(int(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join(_literal(item) for item in value) + "]"
    if isinstance(value, datetime):
        return "'" + value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "'"
    raise TypeError(f"no literal for {type(value).__name__}")


@dataclass
class _Pending:
    """Rows of one writer waiting for the group commit, by table name."""

    rows: dict[str, list[list[Any]]]
    # The name claim the rows make (project, name), dropped from the slots if they fail.
    claim: tuple[str, str] | None = None
    done: bool = False
    error: BaseException | None = None


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
        self._queue: list[_Pending] = []
        self._busy = False
        self._in_flight = 0
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
        self._queue.append(pending)
        self._in_flight += 1
        return pending

    def known(self, slots: dict[_K, _V], key: _K, assumed: _V, load: Callable[[], _V]) -> _V:
        """A slot's state (holding :attr:`cond`): as held, else what the sole store client
        ``assumed`` (see :attr:`users`), else as the store holds it (``load``).

        Past its bound the table is emptied first when no write is in flight: what it forgets
        is then read from the store, which holds it all.
        """
        if len(self.versions) + len(self.names) > _MAX_SLOTS and self._in_flight == 0:
            self.versions.clear()
            self.names.clear()
        state = slots.get(key)
        if state is None:
            state = assumed if self.users == 1 else load()
        return state

    def commit(self, pending: _Pending, run: Any) -> None:
        """Return once ``pending`` is stored; raise what storing it raised.

        The first waiter finding no commit under way stores everything queued, one insert per
        table (``run(batch)``); the others wait for it, and the next leader takes whatever
        queued meanwhile.
        """
        with self.cond:
            while not pending.done and self._busy:
                self.cond.wait()
            leader = not pending.done
            if leader:
                self._busy = True
                batch, self._queue = self._queue, []
        if leader:
            error: BaseException | None = None
            try:
                run(batch)
            except BaseException as exc:
                error = exc
            with self.cond:
                stored = [item for item in batch if item.rows]
                if stored and error is None:
                    self.commits += 1
                    self.committed += len(stored)
                for item in batch:
                    item.done, item.error = True, error
                    if error is not None and item.claim is not None:
                        # Not live after all (or unknown): the store decides on the next use.
                        self.names.pop(item.claim, None)
                self._in_flight -= len(batch)
                self._busy = False
                self.cond.notify_all()
        if pending.error is not None:
            raise pending.error

    def barrier(self, run: Any) -> None:
        """Return once every write queued before the call is stored."""
        with self.cond:
            pending = self.enqueue(_Pending({}))
        self.commit(pending, run)


# The slot tables of the embedded databases some open store client of this process uses: the
# last client to close drops its table, so a database emptied or made anew while no client had
# it open (the tests' databases) starts with slots read from the store.
_embedded_writes: dict[tuple[str, str], _EmbeddedWrites] = {}
_embedded_writes_lock = threading.Lock()


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
                    journal_path(uri, database), lambda statements: applier.command(statements)
                )
            except BaseException:
                close_client(applier)
                raise
            writes.applier = applier
        writes.users += 1
        return writes


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


# Name claims and soft deletes. Sorted by name because every route addresses a prompt by
# name; ``generation`` keeps each re-creation of a soft-deleted name as its own row, and
# ReplacingMergeTree(row_version) lets the delete row (row_version 2) supersede the claim.
PROMPTS = Table(
    name="prompts",
    columns=(
        "project String",
        "name String",
        "generation UInt32",
        "prompt_id String",
        "created_at DateTime64(3, 'UTC')",
        "is_deleted UInt8",
        "deleted_at DateTime64(3, 'UTC')",
        "row_version UInt8",
    ),
    indexes=("INDEX idx_prompt_id prompt_id TYPE bloom_filter GRANULARITY 1",),
    engine="ReplacingMergeTree",
    engine_args=("row_version",),
    order_by="(project, name, generation)",
    dedup=True,
)

# Immutable version rows, append-only: a version is never rewritten, so plain MergeTree.
# Sorted by (project, prompt_id, version): "latest" is the last row of a short range.
PROMPT_VERSIONS = Table(
    name="prompt_versions",
    columns=(
        "project String",
        "prompt_id String",
        "version UInt32",
        "version_id UUID",
        "name String",
        "description String",
        "template String",
        "model String",
        "parameters String",
        "tags Array(String)",
        "folder String",
        "note String",
        "prompt_created_at DateTime64(3, 'UTC')",
        "created_at DateTime64(3, 'UTC')",
        # The whole version as one JSON array, written by ClickHouse at insert: a point read
        # of one column costs about half one of thirteen (each column read has its own
        # fixed cost), and cold reads are point reads.
        "version_json String MATERIALIZED toJSONString((prompt_id, version, "
        "toString(version_id), name, description, template, model, parameters, tags, folder, "
        "note, toUnixTimestamp64Milli(prompt_created_at), toUnixTimestamp64Milli(created_at)))",
    ),
    order_by="(project, prompt_id, version)",
    dedup=True,
    settings=("index_granularity = 256",),
)

# The newest version's list fields per prompt, fed by a materialized view so a version and
# its head land in one insert. ReplacingMergeTree(version) keeps the highest version; reads
# use FINAL so unmerged parts never show an older head.
PROMPT_HEADS = Table(
    name="prompt_heads",
    columns=(
        "project String",
        "prompt_id String",
        "version UInt32",
        "name String",
        "description String",
        "model String",
        "tags Array(String)",
        "folder String",
        "prompt_created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("version",),
    order_by="(project, prompt_id)",
)

PROMPT_HEADS_MV = View(
    name="prompt_heads_mv",
    to_table="prompt_heads",
    select=(
        "SELECT project, prompt_id, version, name, description, model, tags, folder, "
        "prompt_created_at, created_at AS updated_at FROM {db}.prompt_versions"
    ),
)

# A label points at one version at a time; the newest move wins (version 0 = removed).
PROMPT_LABELS = Table(
    name="prompt_labels",
    columns=(
        "project String",
        "prompt_id String",
        "label String",
        "version UInt32",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, prompt_id, label)",
)


@dataclass(frozen=True)
class PromptVersionRow:
    """One stored version of a prompt, with the fields its prompt had at that version."""

    prompt_id: str
    version: int
    version_id: str
    name: str
    description: str
    template: str
    model: str
    parameters: dict[str, Any]
    tags: list[str]
    folder: str
    note: str
    prompt_created_at: datetime
    created_at: datetime


@dataclass(frozen=True)
class PromptHeadRow:
    """A list item: the prompt's newest version's list fields."""

    prompt_id: str
    name: str
    description: str
    version: int
    prompt_created_at: datetime
    tags: list[str]
    folder: str


@dataclass(frozen=True)
class PromptRef:
    """How a path addresses a prompt: by id (``prompt_<hex>``) or by name."""

    value: str
    by_id: bool


@dataclass(frozen=True)
class LivePrompt:
    """A live prompt as the embedded store's index keeps it: newest version and labels.

    ``rows`` are the stored versions a read can ask for by default (the newest and each
    labeled one), so the index answers those reads from memory.
    """

    name: str
    prompt_id: str
    newest: int
    labels: tuple[tuple[str, int], ...]
    rows: tuple[PromptVersionRow, ...] = ()


@dataclass(frozen=True)
class LiveState:
    """Every live prompt of a project, and the newest label move ever stored in it.

    ``generations`` is the highest generation each name ever claimed (deleted ones too): the
    generation a create of that name claims next is one more.
    """

    prompts: list[LivePrompt]
    label_stamp: datetime | None
    generations: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RegistryChanges:
    """What other writers may have stored in some projects since a time (a poll's answer).

    ``claims`` are (project, name, generation, prompt_id, is_deleted) rows, claims and delete
    rows alike, in (project, name, generation, claim before delete) order; ``versions`` the
    versions stored since, per project; ``labels`` the store's current pointer of every
    (project, prompt_id, label) moved since, as (project, prompt_id, label, version, last
    move's updated_at), version 0 when removed.
    """

    claims: list[tuple[str, str, int, str, bool]]
    versions: list[tuple[str, PromptVersionRow]]
    labels: list[tuple[str, str, str, int, datetime]]


@dataclass(frozen=True)
class ListFilter:
    """Filters of the prompt list."""

    tags: list[str]
    folder: str | None
    search: str | None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Versions read per query when an index loads a project's newest and labeled versions.
_ROWS_CHUNK = 5_000
# chDB handles the registry's writes may hold open at once (embedded store).
_WRITE_HANDLES = 4


def _packed_version(text: str) -> PromptVersionRow:
    """Build a version from its ``version_json`` column."""
    row = json.loads(text)
    return PromptVersionRow(
        prompt_id=row[0],
        version=int(row[1]),
        version_id=row[2],
        name=row[3],
        description=row[4],
        template=row[5],
        model=row[6],
        parameters=json.loads(row[7]) if row[7] else {},
        tags=list(row[8]),
        folder=row[9],
        note=row[10],
        prompt_created_at=_EPOCH + timedelta(milliseconds=int(row[11])),
        created_at=_EPOCH + timedelta(milliseconds=int(row[12])),
    )


def _version_token(project: str, prompt_id: str, version: int) -> str:
    return f"version/{project}/{prompt_id}/{version}"


def _claim_token(project: str, name: str, generation: int) -> str:
    return f"claim/{project}/{name}/{generation}"


def _version_values(project: str, row: PromptVersionRow) -> list[Any]:
    """The inserted columns of ``prompt_versions`` for a version, in table order."""
    return [
        project,
        row.prompt_id,
        row.version,
        row.version_id,
        row.name,
        row.description,
        row.template,
        row.model,
        json.dumps(row.parameters, ensure_ascii=False, sort_keys=True),
        row.tags,
        row.folder,
        row.note,
        row.prompt_created_at,
        row.created_at,
    ]


class PromptStore:
    """Every query of the prompt tables."""

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
        names = table.inserted_columns()
        columns = ", ".join(quote(name) for name in names)
        settings = (
            "" if token is None else f"SETTINGS insert_deduplication_token = {_literal(token)} "
        )
        values = ", ".join("(" + ", ".join(_literal(v) for v in row) + ")" for row in rows)
        return f"INSERT INTO {self._targets[table.name]} ({columns}) {settings}VALUES {values}"

    def _store_batch(self, batch: list[_Pending]) -> None:
        """Store the rows of every writer in ``batch``: one insert per table, kept by one
        append to the journal (applied in order right behind it).

        Versions go first, then name claims, then labels: a claim is the commit point of its
        version, and a label points at a stored version. Each insert carries a token of its
        own, so an entry applied again after a crash stores its rows once.
        """
        statements = []
        entry = uuid.uuid4().hex
        for table in (PROMPT_VERSIONS, PROMPTS, PROMPT_LABELS):
            rows = [row for item in batch for row in item.rows.get(table.name, ())]
            if rows:
                statements.append(self._values_sql(table, rows, f"journal/{entry}/{table.name}"))
        if statements:
            assert self._writes is not None and self._writes.journal is not None
            self._writes.journal.append("; ".join(statements))

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

    # -- resolving a path's prompt ---------------------------------------------------------

    def _live_id_subquery(self, ref: PromptRef) -> str:
        key = "prompt_id = {ref:String}" if ref.by_id else "name = {ref:String}"
        return (
            f"(SELECT prompt_id FROM {self._prompts} FINAL WHERE project = {{project:String}} "
            f"AND {key} AND is_deleted = 0 ORDER BY generation DESC LIMIT 1)"
        )

    def live_prompt_id(self, project: str, ref: PromptRef) -> str | None:
        """Return the id of the live prompt a path addresses, or None."""
        rows = self._point_rows(
            f"SELECT {self._live_id_subquery(ref)}",
            project=project,
            ref=ref.value,
        )
        value = rows[0][0] if rows else None
        return str(value) if value else None

    def name_state(self, project: str, name: str) -> tuple[int, bool]:
        """Return (highest generation used, whether that generation is live) for a name."""
        rows = self._point_rows(
            f"SELECT generation, is_deleted FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND name = {name:String} "
            "ORDER BY generation DESC LIMIT 1",
            project=project,
            name=name,
        )
        if not rows:
            return 0, False
        return int(rows[0][0]), not rows[0][1]

    def live_prompts(self, project: str, limit: int) -> LiveState | None:
        """Return every live prompt of a project with its newest version and labels.

        None past ``limit`` name claims (deleted ones included). Claims are sorted by (name,
        generation), so a name's newest live claim comes last: the same answer
        :meth:`live_prompt_id` gives for each name and id. Four queries in this order (claims,
        newest versions, labels, the rows of the newest and labeled versions), so a prompt's
        claim is never read without its first version, nor a label without its version.
        """
        params: dict[str, Any] = {"project": project, "limit": limit + 1}
        claims = self._client.query(
            f"SELECT name, prompt_id, generation, is_deleted FROM {self._prompts} FINAL "
            "WHERE project = {project:String} ORDER BY name, generation LIMIT {limit:UInt64}",
            parameters=params,
        ).result_rows
        if len(claims) > limit:
            return None
        generations = {str(name): int(generation) for name, _, generation, _ in claims}
        live = (
            f"prompt_id IN (SELECT prompt_id FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND is_deleted = 0)"
        )
        newest = {
            str(prompt_id): int(version)
            for prompt_id, version in self._client.query(
                f"SELECT prompt_id, max(version) FROM {self._versions} "
                f"WHERE project = {{project:String}} AND {live} GROUP BY prompt_id",
                parameters=params,
            ).result_rows
        }
        labels: dict[str, list[tuple[str, int]]] = {}
        for prompt_id, label, version in self._client.query(
            f"SELECT prompt_id, label, version FROM {self._labels} FINAL "
            f"WHERE project = {{project:String}} AND version > 0 AND {live}",
            parameters=params,
        ).result_rows:
            labels.setdefault(str(prompt_id), []).append((str(label), int(version)))
        stamp = self._client.query(
            f"SELECT count(), max(updated_at) FROM {self._labels} "
            "WHERE project = {project:String}",
            parameters=params,
        ).result_rows
        wanted = {(pid, v) for pid, v in newest.items()} | {
            (pid, v) for pid, pairs in labels.items() for _, v in pairs
        }
        rows: dict[str, list[PromptVersionRow]] = {}
        for row in self._rows_at(project, sorted(wanted)):
            rows.setdefault(row.prompt_id, []).append(row)
        return LiveState(
            prompts=[
                LivePrompt(
                    name=str(name),
                    prompt_id=str(prompt_id),
                    newest=newest.get(str(prompt_id), 0),
                    labels=tuple(labels.get(str(prompt_id), ())),
                    rows=tuple(rows.get(str(prompt_id), ())),
                )
                for name, prompt_id, _, is_deleted in claims
                if not is_deleted
            ],
            label_stamp=utc(stamp[0][1]) if stamp and stamp[0][0] else None,
            generations=generations,
        )

    def _rows_at(self, project: str, keys: Sequence[tuple[str, int]]) -> list[PromptVersionRow]:
        """Read the versions at (prompt_id, version) keys, in chunks the key index can use."""
        found: list[PromptVersionRow] = []
        for start in range(0, len(keys), _ROWS_CHUNK):
            chunk = keys[start : start + _ROWS_CHUNK]
            found.extend(
                _packed_version(r[0])
                for r in self._client.query(
                    f"SELECT version_json FROM {self._versions} "
                    "WHERE project = {project:String} AND prompt_id IN {ids:Array(String)} "
                    "AND (prompt_id, version) IN {keys:Array(Tuple(String, UInt32))}",
                    parameters={
                        "project": project,
                        "ids": sorted({pid for pid, _ in chunk}),
                        "keys": list(chunk),
                    },
                ).result_rows
            )
        return found

    def changes(self, projects: Sequence[str], since: datetime) -> RegistryChanges:
        """Return the claims, deletes, versions and label moves stored in ``projects`` with a
        time at or after ``since`` (a poll of a collector sharing the store with others).

        Three queries, each one range of the tables' first sorting column (``project``) read
        with a filter on the rows' own time column: a claim's ``created_at`` or a delete's
        ``deleted_at``, a version's ``created_at``, a label move's ``updated_at``. The times
        are the writers' clocks, so the caller reads from a little before its last poll.
        """
        params: dict[str, Any] = {"projects": list(projects), "since": since}
        claims = [
            (str(r[0]), str(r[1]), int(r[2]), str(r[3]), bool(r[4]))
            for r in self._client.query(
                f"SELECT project, name, generation, prompt_id, is_deleted FROM {self._prompts} "
                "WHERE project IN {projects:Array(String)} "
                "AND greatest(created_at, deleted_at) >= {since:DateTime64(3, 'UTC')} "
                "ORDER BY project, name, generation, row_version",
                parameters=params,
            ).result_rows
        ]
        versions = [
            (str(r[0]), _packed_version(r[1]))
            for r in self._client.query(
                f"SELECT project, version_json FROM {self._versions} "
                "WHERE project IN {projects:Array(String)} "
                "AND created_at >= {since:DateTime64(3, 'UTC')} "
                "ORDER BY project, prompt_id, version",
                parameters=params,
            ).result_rows
        ]
        # The winner of each moved label (the newest move, as FINAL would keep), not each move.
        labels = [
            (str(r[0]), str(r[1]), str(r[2]), int(r[3]), utc(r[4]))
            for r in self._client.query(
                "SELECT project, prompt_id, label, argMax(version, updated_at), max(updated_at) "
                f"FROM {self._labels} WHERE project IN {{projects:Array(String)}} "
                f"AND (project, prompt_id, label) IN (SELECT project, prompt_id, label "
                f"FROM {self._labels} WHERE project IN {{projects:Array(String)}} "
                "AND updated_at >= {since:DateTime64(6, 'UTC')}) "
                "GROUP BY project, prompt_id, label",
                parameters=params,
            ).result_rows
        ]
        return RegistryChanges(claims=claims, versions=versions, labels=labels)

    # -- versions --------------------------------------------------------------------------

    def _pick_version(self, params: dict[str, Any], number: int | None, label: str | None) -> str:
        """Return the filter that picks a version (newest when neither is given)."""
        if number is not None:
            params["number"] = number
            return "AND version = {number:UInt32}"
        if label is not None:
            params["label"] = label
            return (
                f"AND version = (SELECT version FROM {self._labels} FINAL "
                "WHERE project = {project:String} AND prompt_id = pid "
                "AND label = {label:String} LIMIT 1)"
            )
        return ""

    def version(
        self, project: str, ref: PromptRef, number: int | None = None, label: str | None = None
    ) -> PromptVersionRow | None:
        """Return one version of a live prompt: the newest, a number, or a label's target."""
        params: dict[str, Any] = {"project": project, "ref": ref.value}
        return self._one_version(self._live_id_subquery(ref), params, number, label)

    def version_at(self, project: str, prompt_id: str, version: int) -> PromptVersionRow | None:
        """Return one version of a prompt by stored id and number, without checking it is live.

        For callers that know the prompt is live and which version they want (the embedded
        store's live-id index): one point read on the full sorting key, no sort, no subquery.
        """
        rows = self._point_rows(
            f"SELECT version_json FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1",
            project=project,
            pid=prompt_id,
            v=version,
        )
        return _packed_version(rows[0][0]) if rows else None

    def _one_version(
        self, pid: str, params: dict[str, Any], number: int | None, label: str | None
    ) -> PromptVersionRow | None:
        """Read the version :meth:`_pick_version` names of the prompt ``pid`` (an expression)."""
        where = self._pick_version(params, number, label)
        rows = self._point_rows(
            f"WITH {pid} AS pid SELECT version_json FROM {self._versions} "
            f"WHERE project = {{project:String}} AND prompt_id = pid {where} "
            "ORDER BY version DESC LIMIT 1",
            **params,
        )
        return _packed_version(rows[0][0]) if rows else None

    def versions(
        self,
        project: str,
        prompt_id: str,
        before: int | None = None,
        limit: int | None = None,
    ) -> list[PromptVersionRow]:
        """Return a prompt's versions newest first: those numbered below ``before`` if given,
        at most ``limit`` of them if given (a range of the sorting key, read backwards)."""
        params: dict[str, Any] = {"project": project, "pid": prompt_id}
        below = ""
        if before is not None:
            below = "AND version < {before:UInt32} "
            params["before"] = before
        most = ""
        if limit is not None:
            most = " LIMIT {limit:UInt32}"
            params["limit"] = limit
        rows = self._point_rows(
            f"SELECT version_json FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            f"{below}ORDER BY version DESC{most}",
            **params,
        )
        return [_packed_version(r[0]) for r in rows]

    def try_insert_version(self, project: str, row: PromptVersionRow) -> bool:
        """Insert a version if its number is free; return whether this writer got it."""
        return self.insert_version(project, row) == row.version_id

    def insert_version(self, project: str, row: PromptVersionRow) -> str | None:
        """Insert a version if its number is free; return the version id stored at the number.

        The row's own ``version_id`` when this writer got the number, another writer's when it
        lost the race (the number is then stored all the same), None if nothing is stored.
        On the embedded store the slot table decides and nothing is read back.
        """
        if self._writes is not None:
            return self._insert_version_embedded(project, row)
        token = _version_token(project, row.prompt_id, row.version)
        readback = (
            f"SELECT toString(version_id) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1"
        )
        keys = {"project": project, "pid": row.prompt_id, "v": row.version}
        self._insert(
            PROMPT_VERSIONS,
            _version_values(project, row),
            {**self._write_settings, "insert_deduplication_token": token},
        )
        rows = self._client.query(
            readback, parameters=keys, settings=self._readback_settings
        ).result_rows
        return str(rows[0][0]) if rows else None

    def _insert_version_embedded(self, project: str, row: PromptVersionRow) -> str | None:
        """Take the number in the slot table and store the row with whoever else is waiting.

        A number already taken (by another store client of this database: one client's
        writers of a prompt take turns) waits until every queued write is stored and reads
        the number's owner, as the read-back does elsewhere.
        """
        writes = self._writes
        assert writes is not None
        key = (project, row.prompt_id)
        with writes.cond:
            top = writes.known(
                writes.versions,
                key,
                row.version - 1,
                lambda: self._top_version(project, row.prompt_id),
            )
            mine = row.version > top
            if mine:
                writes.versions[key] = row.version
                pending = writes.enqueue(
                    _Pending({PROMPT_VERSIONS.name: [_version_values(project, row)]})
                )
        if mine:
            self._commit(pending)
            return row.version_id
        self._writes_barrier()
        return self._version_id_at(project, row.prompt_id, row.version)

    def _top_version(self, project: str, prompt_id: str) -> int:
        rows = self._point_rows(
            f"SELECT max(version) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String}",
            project=project,
            pid=prompt_id,
        )
        return int(rows[0][0]) if rows and rows[0][0] else 0

    def _version_id_at(self, project: str, prompt_id: str, version: int) -> str | None:
        rows = self._point_rows(
            f"SELECT toString(version_id) FROM {self._versions} "
            "WHERE project = {project:String} AND prompt_id = {pid:String} "
            "AND version = {v:UInt32} LIMIT 1",
            project=project,
            pid=prompt_id,
            v=version,
        )
        return str(rows[0][0]) if rows else None

    # -- names: claim and soft delete ------------------------------------------------------

    def create(self, project: str, row: PromptVersionRow, generation: int) -> bool:
        """Store a new prompt's first version, then claim its name's ``generation``; return
        whether this writer got the claim.

        The version goes in first and stays unreachable until the claim, the commit point,
        succeeds: a lost race leaves an unreachable row, never a half prompt. On the embedded
        store the slot table decides, and both rows go in one group commit, version first.
        """
        claim = [
            project,
            row.name,
            generation,
            row.prompt_id,
            row.prompt_created_at,
            0,
            row.prompt_created_at,
            1,
        ]
        if self._writes is not None:
            return self._create_embedded(project, row, claim, generation)
        self.insert_version(project, row)
        return self.try_claim_name(
            project, row.name, generation, row.prompt_id, row.prompt_created_at
        )

    def _create_embedded(
        self, project: str, row: PromptVersionRow, claim: list[Any], generation: int
    ) -> bool:
        """Claim the generation in the slot table if the name is not live and the generation
        is new, and store version 1 and the claim with whoever else is waiting."""
        writes = self._writes
        assert writes is not None
        key = (project, row.name)
        with writes.cond:
            state = writes.known(
                writes.names,
                key,
                (generation - 1, False),
                lambda: self.name_state(project, row.name),
            )
            mine = generation > state[0] and not state[1]
            if mine:
                writes.names[key] = (generation, True)
                writes.versions[(project, row.prompt_id)] = row.version
                pending = writes.enqueue(
                    _Pending(
                        {
                            PROMPT_VERSIONS.name: [_version_values(project, row)],
                            PROMPTS.name: [claim],
                        },
                        claim=key,
                    )
                )
        if mine:
            self._commit(pending)
            return True
        # Lost to a write of another store client: once it is stored, the caller asks the store.
        self._writes_barrier()
        return False

    def _claim_readback(self) -> str:
        return (
            f"SELECT prompt_id FROM {self._prompts} FINAL WHERE project = {{project:String}} "
            "AND name = {name:String} AND generation = {g:UInt32} LIMIT 1"
        )

    def try_claim_name(
        self, project: str, name: str, generation: int, prompt_id: str, created_at: datetime
    ) -> bool:
        """Claim a name's generation for a prompt; return whether this writer got it."""
        self._insert(
            PROMPTS,
            [project, name, generation, prompt_id, created_at, 0, created_at, 1],
            {
                **self._write_settings,
                "insert_deduplication_token": _claim_token(project, name, generation),
            },
        )
        winner = self._client.query(
            self._claim_readback(),
            parameters={"project": project, "name": name, "g": generation},
            settings=self._readback_settings,
        ).result_rows
        return bool(winner) and winner[0][0] == prompt_id

    def mark_deleted(self, project: str, prompt_id: str, deleted_at: datetime) -> str | None:
        """Soft-delete a live prompt; return its name, or None if it was not live."""
        rows = self._point_rows(
            f"SELECT name, generation, created_at FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND prompt_id = {pid:String} AND is_deleted = 0 "
            "LIMIT 1",
            project=project,
            pid=prompt_id,
        )
        if not rows:
            return None
        name, generation, created_at = rows[0]
        self._insert(
            PROMPTS,
            [project, name, generation, prompt_id, created_at, 1, deleted_at, 2],
            {"insert_deduplication_token": f"delete/{project}/{name}/{generation}"},
        )
        if self._writes is not None:
            with self._writes.cond:
                key = (project, str(name))
                if self._writes.names.get(key, (0, False))[0] <= int(generation):
                    self._writes.names[key] = (int(generation), False)
        return str(name)

    # -- list ------------------------------------------------------------------------------

    def list_heads(
        self,
        project: str,
        filters: ListFilter,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> tuple[list[PromptHeadRow], int | None]:
        """Return one page of live prompts, newest first, and the count matching the filters.

        The count comes from a window over the filtered set, so it is None only when the
        cursor is past the last match (the caller then asks :meth:`count_heads`).
        """
        where, params = self._list_where(project, filters)
        cursor_sql = ""
        if after is not None:
            cursor_sql = (
                "WHERE (prompt_created_at, prompt_id) < ({after_at:DateTime64(3, 'UTC')}, "
                "{after_id:String})"
            )
            params.update(after_at=after[0], after_id=after[1])
        params["limit"] = limit
        rows = self._client.query(
            "SELECT prompt_id, name, description, version, prompt_created_at, total, tags, "
            "folder FROM (SELECT prompt_id, name, description, version, prompt_created_at, "
            "tags, folder, "
            f"count() OVER () AS total FROM {self._heads_source} WHERE {where}) "
            f"{cursor_sql} ORDER BY prompt_created_at DESC, prompt_id DESC "
            "LIMIT {limit:UInt32}",
            parameters=params,
        ).result_rows
        heads = [
            PromptHeadRow(
                prompt_id=r[0],
                name=r[1],
                description=r[2],
                version=int(r[3]),
                prompt_created_at=utc(r[4]),
                tags=list(r[6]),
                folder=r[7],
            )
            for r in rows
        ]
        return heads, (int(rows[0][5]) if rows else None)

    def count_heads(self, project: str, filters: ListFilter) -> int:
        """Count live prompts matching the filters."""
        where, params = self._list_where(project, filters)
        rows = self._client.query(
            f"SELECT count() FROM {self._heads_source} WHERE {where}", parameters=params
        ).result_rows
        return int(rows[0][0])

    def _list_where(self, project: str, filters: ListFilter) -> tuple[str, dict[str, Any]]:
        clauses = [
            "project = {project:String}",
            f"prompt_id IN (SELECT prompt_id FROM {self._prompts} FINAL "
            "WHERE project = {project:String} AND is_deleted = 0)",
        ]
        params: dict[str, Any] = {"project": project}
        if filters.tags:
            clauses.append("hasAll(tags, {tags:Array(String)})")
            params["tags"] = filters.tags
        if filters.folder is not None:
            clauses.append(
                "(folder = {folder:String} OR startsWith(folder, {folder_prefix:String}))"
            )
            params["folder"] = filters.folder
            params["folder_prefix"] = filters.folder.rstrip("/") + "/"
        if filters.search:
            clauses.append(
                "(positionCaseInsensitiveUTF8(name, {q:String}) > 0 "
                "OR positionCaseInsensitiveUTF8(description, {q:String}) > 0)"
            )
            params["q"] = filters.search
        return " AND ".join(clauses), params

    # -- labels ----------------------------------------------------------------------------

    def set_label(
        self, project: str, prompt_id: str, label: str, version: int, at: datetime
    ) -> None:
        """Point a label at a version (0 removes it)."""
        values = [project, prompt_id, label, version, at]
        if self._writes is not None:
            with self._writes.cond:
                pending = self._writes.enqueue(_Pending({PROMPT_LABELS.name: [values]}))
            self._commit(pending)
            return
        self._insert(PROMPT_LABELS, values, {})

    def labels(self, project: str, prompt_id: str) -> list[tuple[str, int, datetime]]:
        """Return (label, version, updated_at) of the prompt's attached labels, by name."""
        rows = self._point_rows(
            f"SELECT label, version, updated_at FROM {self._labels} FINAL "
            "WHERE project = {project:String} AND prompt_id = {pid:String} AND version > 0 "
            "ORDER BY label",
            project=project,
            pid=prompt_id,
        )
        return [(str(r[0]), int(r[1]), utc(r[2])) for r in rows]
