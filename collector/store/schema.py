"""Table definitions and the DDL they render to, embedded/single server or cluster.

Every table leads its ORDER BY with ``project``: each query of the collector is scoped to one
project, so the primary index prunes every other tenant's granules first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# ClickHouse remembers the ids of this many recent insert blocks per table; two inserts with
# the same ``insert_deduplication_token`` inside the window keep only the first. The registry
# uses that as an atomic compare-and-set (see docs/architecture.md).
DEDUP_WINDOW = 10_000


@dataclass(frozen=True)
class Table:
    """One table: columns, engine family, sort key and settings."""

    name: str
    columns: tuple[str, ...]
    order_by: str
    engine: str = "MergeTree"
    engine_args: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    dedup: bool = False
    partition_by: str | None = None
    ttl: str | None = None
    # Big tables are sharded on a cluster: a local replicated table per shard and a
    # Distributed table, under the plain name, that fans reads out and routes inserts.
    sharded: bool = False
    sharding_key: str = "rand()"
    # Storage settings rendered into SETTINGS, e.g. a finer index_granularity.
    settings: tuple[str, ...] = ()

    def inserted_columns(self) -> list[str]:
        """Return the names of the columns an insert gives (not those ClickHouse computes)."""
        return [
            name
            for name, rest in (column.split(" ", 1) for column in self.columns)
            if not _COMPUTED.search(rest)
        ]

    def column_types(self, names: Sequence[str]) -> list[str]:
        """Return the ClickHouse types of ``names``, as an insert names its columns.

        An insert given its column types skips the ``DESCRIBE TABLE`` round trip
        clickhouse-connect otherwise makes before every insert.
        """
        types = dict(_split_column(column) for column in self.columns)
        return [types[name] for name in names]


@dataclass(frozen=True)
class View:
    """A materialized view writing into an existing table.

    ``select`` names tables as ``{db}.name``. A view over a sharded table says so with
    ``sharded``: on a cluster it then reads the shard's local table (``{local}`` in
    ``select`` renders as ``_local``) and writes the local table of ``to_table``, so each
    shard indexes its own inserts; elsewhere ``{local}`` renders as nothing.
    """

    name: str
    to_table: str
    select: str
    sharded: bool = False


@dataclass(frozen=True)
class Backfill:
    """Write what a new materialized view would have written for the rows already stored.

    Rendered as ``INSERT INTO <to_table> <select>`` after the view exists, so a row stored
    while the migration runs is written by the view, by the backfill, or by both: the view's
    table must take a row twice without harm (a ReplacingMergeTree whose reads de-duplicate).
    That also makes re-running the step (two collectors starting at once, or a start-up that
    stopped before recording the migration) harmless.
    """

    view: View
    into: Table
    # Query settings of the copy, e.g. smaller insert blocks where rows are wide.
    settings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DropIndex:
    """Drop a data-skipping index of a table (on a cluster: of each shard's local table)."""

    table: Table
    index: str


@dataclass(frozen=True)
class AddColumn:
    """Add a column of ``table``'s definition to a table made before it, and fill it.

    For a MATERIALIZED column, parts written before read it computed from the other columns
    until the (background) ``MATERIALIZE COLUMN`` mutation has rewritten them.
    """

    table: Table
    column: str


@dataclass(frozen=True)
class RoutedColumn:
    """On a cluster, add a column of a sharded table's definition to the Distributed table in
    front of its shards' tables, where an :class:`AddColumn` applied before migration 55 added
    it to the shards' tables only (nothing on a single store: its one table has it).

    A Distributed table knows the columns it was made with: without this, reads and inserts
    through it of a column added since fail (``Missing columns``).
    """

    table: Table
    column: str


@dataclass(frozen=True)
class ModifyColumn:
    """Give a column of a table made before it the definition in ``table``'s (its type, its
    DEFAULT or MATERIALIZED expression).

    ``ALTER TABLE … MODIFY COLUMN``. A change of the expression alone is metadata: the parts
    keep the values they hold (a part without the column reads its DEFAULT expression).
    """

    table: Table
    column: str


@dataclass(frozen=True)
class AddIndex:
    """Add a data-skipping index of ``table``'s definition to a table made before it.

    The index covers the parts written from then on at once, the older ones once the
    (background) ``MATERIALIZE INDEX`` mutation has rewritten them; until then a read tests
    those parts' rows as without the index.
    """

    table: Table
    index: str


@dataclass(frozen=True)
class ModifySetting:
    """Give a table made before it one storage setting of ``table``'s definition.

    ClickHouse applies a changed MergeTree setting to the parts it writes from then on.
    """

    table: Table
    setting: str


@dataclass(frozen=True)
class EmbeddedSetting:
    """Give a table one storage setting on the embedded store (chDB) only: ``setting`` is the
    whole ``name = value``, for a setting a ClickHouse server of an older release may not
    know (see migration 52). Applies to the parts written from then on.
    """

    table: Table
    setting: str


@dataclass(frozen=True)
class ModifyQuery:
    """Give a materialized view made before it the ``select`` of its definition.

    ``ALTER TABLE <view> MODIFY QUERY``: inserts from then on go through the new query, none
    is missed (the view is never dropped). Its target table must have the new columns first.
    """

    view: View


@dataclass(frozen=True)
class DropView:
    """Drop a materialized view (its target table stays, readable as it was).

    ``embedded_only``: only on the embedded store (chDB), where the collector keeps what the
    view fed in memory; a ClickHouse server keeps the view (see migration 24).
    """

    view: View
    embedded_only: bool = False


# What a migration is made of: each renders to its statements (see render).
SchemaObject = (
    Table
    | View
    | Backfill
    | DropIndex
    | AddColumn
    | RoutedColumn
    | ModifyColumn
    | AddIndex
    | ModifySetting
    | EmbeddedSetting
    | ModifyQuery
    | DropView
)


@dataclass(frozen=True)
class Migration:
    """A numbered, idempotent schema step."""

    version: int
    name: str
    objects: tuple[SchemaObject, ...] = field(default_factory=tuple)


_COMPUTED = re.compile(r"\s(MATERIALIZED|ALIAS)\s")
_COLUMN_CLAUSE = re.compile(r"\s+(DEFAULT|MATERIALIZED|ALIAS|EPHEMERAL|CODEC|TTL|COMMENT)\b")


def _split_column(definition: str) -> tuple[str, str]:
    name, rest = definition.split(" ", 1)
    return name, _COLUMN_CLAUSE.split(rest, maxsplit=1)[0].strip()


def quote(identifier: str) -> str:
    """Backquote an identifier already validated as ``[A-Za-z_][A-Za-z0-9_]*``."""
    return f"`{identifier}`"


def render_database(database: str, cluster: str | None) -> str:
    """Render CREATE DATABASE for the embedded store, a server or a cluster."""
    return f"CREATE DATABASE IF NOT EXISTS {quote(database)}{_on_cluster(cluster)}"


def render(obj: SchemaObject, database: str, cluster: str | None) -> list[str]:
    """Render the statements of a table, a view, a backfill or an alteration."""
    if isinstance(obj, EmbeddedSetting):
        target = f"{quote(database)}.{quote(obj.table.name)}"
        return [f"ALTER TABLE {target} MODIFY SETTING {obj.setting}"]
    if isinstance(obj, RoutedColumn):
        if not (cluster and obj.table.sharded):
            return []
        (definition,) = [c for c in obj.table.columns if c.split(" ", 1)[0] == obj.column]
        return [
            f"{_routed_alter(obj.table, database, cluster)} ADD COLUMN IF NOT EXISTS {definition}"
        ]
    if isinstance(obj, DropIndex | AddColumn | ModifyColumn | AddIndex | ModifySetting):
        local = "_local" if cluster and obj.table.sharded else ""
        alter = f"ALTER TABLE {quote(database)}.{quote(obj.table.name + local)}" + _on_cluster(
            cluster
        )
        if isinstance(obj, DropIndex):
            return [f"{alter} DROP INDEX IF EXISTS {quote(obj.index)}"]
        if isinstance(obj, ModifySetting):
            (setting,) = [
                s for s in obj.table.settings if s.split("=", 1)[0].strip() == obj.setting
            ]
            return [f"{alter} MODIFY SETTING {setting}"]
        if isinstance(obj, AddIndex):
            (index,) = [i for i in obj.table.indexes if i.split(" ", 2)[1] == obj.index]
            return [
                f"{alter} ADD {index.replace('INDEX', 'INDEX IF NOT EXISTS', 1)}",
                f"{alter} MATERIALIZE INDEX {quote(obj.index)}",
            ]
        (definition,) = [c for c in obj.table.columns if c.split(" ", 1)[0] == obj.column]
        if isinstance(obj, ModifyColumn):
            if not local:
                return [f"{alter} MODIFY COLUMN {definition}"]
            # The Distributed table too: an insert through it that leaves the column out is
            # given its default there, before its rows go to the shards.
            routed = _routed_alter(obj.table, database, cluster)
            return [f"{alter} MODIFY COLUMN {definition}", f"{routed} MODIFY COLUMN {definition}"]
        added = [
            f"{alter} ADD COLUMN IF NOT EXISTS {definition}",
            f"{alter} MATERIALIZE COLUMN {quote(obj.column)}",
        ]
        if local:
            # The Distributed table in front of the shards' tables too: a store's reads and
            # inserts go through it, and it knows only the columns it was made with (a cluster
            # made after the migration has them: its Distributed table copies the shards').
            routed = _routed_alter(obj.table, database, cluster)
            added.append(f"{routed} ADD COLUMN IF NOT EXISTS {definition}")
        return added
    if isinstance(obj, ModifyQuery):
        view = obj.view
        local = "_local" if cluster and view.sharded else ""
        return [
            f"ALTER TABLE {quote(database)}.{quote(view.name)}{_on_cluster(cluster)} "
            f"MODIFY QUERY {view.select.format(db=quote(database), local=local)}"
        ]
    if isinstance(obj, DropView):
        return [
            f"DROP VIEW IF EXISTS {quote(database)}.{quote(obj.view.name)}{_on_cluster(cluster)}"
        ]
    if isinstance(obj, View):
        return [_render_view(obj, database, cluster)]
    if isinstance(obj, Backfill):
        return [_render_backfill(obj, database, cluster)]
    if cluster and obj.sharded:
        local = f"{obj.name}_local"
        return [
            _render_table(obj, database, cluster, name=local, shard_path=True),
            f"CREATE TABLE IF NOT EXISTS {quote(database)}.{quote(obj.name)}"
            f"{_on_cluster(cluster)} AS {quote(database)}.{quote(local)}\n"
            f"ENGINE = Distributed({quote(cluster)}, {quote(database)}, {quote(local)}, "
            f"{obj.sharding_key})",
        ]
    return [_render_table(obj, database, cluster)]


def _routed_alter(table: Table, database: str, cluster: str | None) -> str:
    """``ALTER TABLE`` of a sharded table's Distributed table (the one its reads go through)."""
    return f"ALTER TABLE {quote(database)}.{quote(table.name)}{_on_cluster(cluster)}"


def _on_cluster(cluster: str | None) -> str:
    return f" ON CLUSTER {quote(cluster)}" if cluster else ""


def _render_table(
    table: Table,
    database: str,
    cluster: str | None,
    name: str | None = None,
    shard_path: bool = False,
) -> str:
    body = ",\n    ".join((*table.columns, *table.indexes))
    target = f"{quote(database)}.{quote(name or table.name)}"
    lines = [
        f"CREATE TABLE IF NOT EXISTS {target}{_on_cluster(cluster)}",
        f"(\n    {body}\n)",
        f"ENGINE = {_engine(table, cluster, shard_path)}",
    ]
    if table.partition_by:
        lines.append(f"PARTITION BY {table.partition_by}")
    lines.append(f"ORDER BY {table.order_by}")
    if table.ttl:
        lines.append(f"TTL {table.ttl}")
    settings = _settings(table, cluster)
    if settings:
        lines.append("SETTINGS " + ", ".join(settings))
    return "\n".join(lines)


def _engine(table: Table, cluster: str | None, shard_path: bool = False) -> str:
    args = list(table.engine_args)
    name = table.engine
    if cluster and shard_path:
        args = ["'/clickhouse/promptrail/tables/{shard}/{database}/{table}'", "'{replica}'", *args]
        name = f"Replicated{name}"
    elif cluster:
        # Registry tables are small and read on every request: every node keeps a full
        # replica (no {shard} in the Keeper path), so any collector reads locally.
        # '{shard}-{replica}' stays unique when replica names repeat across shards.
        args = ["'/clickhouse/promptrail/tables/{database}/{table}'", "'{shard}-{replica}'", *args]
        name = f"Replicated{name}"
    return f"{name}({', '.join(args)})"


def _settings(table: Table, cluster: str | None) -> list[str]:
    settings = list(table.settings)
    if table.dedup:
        key = (
            "replicated_deduplication_window" if cluster else "non_replicated_deduplication_window"
        )
        settings.append(f"{key} = {DEDUP_WINDOW}")
    return settings


def _render_view(view: View, database: str, cluster: str | None) -> str:
    local = "_local" if cluster and view.sharded else ""
    select = view.select.format(db=quote(database), local=local)
    return (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {quote(database)}.{quote(view.name)}"
        f"{_on_cluster(cluster)}\nTO {quote(database)}.{quote(view.to_table + local)}\n"
        f"AS {select}"
    )


def _render_backfill(backfill: Backfill, database: str, cluster: str | None) -> str:
    view = backfill.view
    # Through the plain (on a cluster: Distributed) tables. On a cluster each shard then
    # copies its own rows into its own local table, none passing through the initiator.
    select = view.select.format(db=quote(database), local="")
    columns = ", ".join(backfill.into.inserted_columns())
    statement = f"INSERT INTO {quote(database)}.{quote(view.to_table)} ({columns})\n{select}"
    settings = list(backfill.settings)
    if cluster and view.sharded:
        settings.append("parallel_distributed_insert_select = 2")
    if settings:
        statement += "\nSETTINGS " + ", ".join(settings)
    return statement
