"""Datasets and their items (docs/api-notes.md, "Datasets and experiments"): every SQL statement
that reads or writes them.

Both tables are only ever inserted into: a change is a newer row of the same key (newest
``updated_at`` wins), a delete a newer row with ``is_deleted = 1``; reads use ``FINAL``, which
keeps each key's newest row and drops the deleted ones. An item keeps the ``position`` it was
first given, so a replaced item stays where it was in the dataset's order.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, quote
from .writes import WriteOutcome, direct_write

DATASETS = Table(
    name="datasets",
    columns=(
        "project String",
        "id String",
        "name String",
        "description Nullable(String)",
        "metadata String",
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at", "is_deleted"),
    order_by="(project, id)",
)

DATASET_ITEMS = Table(
    name="dataset_items",
    columns=(
        "project String",
        "dataset_id String",
        "id String",
        "position UInt64",  # the order added: kept when the item is replaced
        "input_variables String",  # JSON object
        "expected_output Nullable(String)",  # JSON text (a string or an object)
        "metadata String",
        "source_request_id Nullable(String)",
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at", "is_deleted"),
    order_by="(project, dataset_id, id)",
)


@dataclass(frozen=True)
class DatasetRow:
    """One dataset as stored, with its live item count when read."""

    id: str
    name: str
    description: str | None
    metadata: dict[str, Any]
    created_at: datetime
    item_count: int = 0


@dataclass(frozen=True)
class ItemRow:
    """One dataset item as stored."""

    id: str
    position: int
    input_variables: dict[str, Any]
    expected_output: Any
    metadata: dict[str, Any]
    source_request_id: str | None
    created_at: datetime


_ITEM_COLUMNS = [
    "project",
    "dataset_id",
    "id",
    "position",
    "input_variables",
    "expected_output",
    "metadata",
    "source_request_id",
    "created_at",
    "updated_at",
    "is_deleted",
]
_DATASET_COLUMNS = DATASETS.inserted_columns()


class _Positions:
    """Strictly increasing item positions (microseconds, bumped past the last one given).

    Time-based so that positions from collectors sharing a server store interleave in the
    order the items were added; bumped so that one batch keeps its own order.
    """

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def take(self, count: int) -> int:
        """Reserve ``count`` consecutive positions; return the first."""
        with self._lock:
            first = max(time.time_ns() // 1000, self._last + 1)
            self._last = first + count - 1
            return first


_POSITIONS = _Positions()


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class DatasetStore:
    """Reads and writes ``datasets`` and ``dataset_items``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._datasets = f"{db}.{quote(DATASETS.name)}"
        self._items = f"{db}.{quote(DATASET_ITEMS.name)}"
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    # -- datasets --------------------------------------------------------------------------

    def put(self, project: str, row: DatasetRow, deleted: bool = False) -> WriteOutcome:
        """Store a dataset (a new version of its id); ``deleted`` stores its tombstone.

        Every write of this store answers :data:`~.writes.STORED`, or :class:`~.writes.Refused`
        on a store outage (the service answers its 503); a bug is raised. A refused write
        stored nothing, and a retry is safe (a newer version of the same key).
        """
        return direct_write(lambda: self._put(project, row, deleted))

    def _put(self, project: str, row: DatasetRow, deleted: bool) -> None:
        self._client.insert(
            self._datasets,
            [
                [
                    project,
                    row.id,
                    row.name,
                    row.description,
                    json.dumps(row.metadata, ensure_ascii=False),
                    row.created_at,
                    datetime.now(UTC),
                    int(deleted),
                ]
            ],
            column_names=_DATASET_COLUMNS,
            column_type_names=DATASETS.column_types(_DATASET_COLUMNS),
            settings=self._write,
        )

    def find(self, project: str, ref: str) -> DatasetRow | None:
        """Return the live dataset whose name or id is ``ref``, or None."""
        rows = self._datasets_where(project, "(id = {ref:String} OR name = {ref:String})", ref=ref)
        # A name wins over an id when both match (an id is never a valid name's shape anyway).
        rows.sort(key=lambda r: r.name != ref)
        return rows[0] if rows else None

    def page(
        self, project: str, after: tuple[datetime, str] | None, limit: int
    ) -> list[DatasetRow]:
        """Return up to ``limit`` datasets, newest first, after the position ``after``."""
        where, params = "1", {}
        if after is not None:
            where = "(created_at, id) < ({at:DateTime64(3, 'UTC')}, {aid:String})"
            params = {"at": after[0], "aid": after[1]}
        return self._datasets_where(
            project,
            where,
            tail="ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
            limit=limit,
            **params,
        )

    def _datasets_where(
        self, project: str, where: str, tail: str = "", **params: Any
    ) -> list[DatasetRow]:
        counts = (
            f"SELECT dataset_id, count() AS n FROM {self._items} FINAL "
            "WHERE project = {p:String} AND is_deleted = 0 GROUP BY dataset_id"
        )
        sql = (
            "SELECT d.id, d.name, d.description, d.metadata, d.created_at, c.n FROM ("
            f"SELECT id, name, description, metadata, created_at FROM {self._datasets} FINAL "
            f"WHERE project = {{p:String}} AND is_deleted = 0 AND {where} {tail}"
            f") AS d LEFT JOIN ({counts}) AS c ON c.dataset_id = d.id"
        )
        result = self._client.query(sql, parameters={"p": project, **params}, settings=self._read)
        rows = [
            DatasetRow(
                id=str(r[0]),
                name=str(r[1]),
                description=r[2],
                metadata=json.loads(r[3]),
                created_at=_utc(r[4]),
                item_count=int(r[5] or 0),
            )
            for r in result.result_rows
        ]
        # The join does not keep the inner order.
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return rows

    # -- items -----------------------------------------------------------------------------

    def put_items(self, project: str, dataset_id: str, items: Sequence[ItemRow]) -> WriteOutcome:
        """Store items; an id already in the dataset keeps its position (replaced in place).
        Answers as :meth:`put` does."""
        return direct_write(lambda: self._put_items(project, dataset_id, items))

    def _put_items(self, project: str, dataset_id: str, items: Sequence[ItemRow]) -> None:
        if not items:
            return
        known = self.positions(project, dataset_id, [i.id for i in items])
        first = _POSITIONS.take(len(items))
        written = datetime.now(UTC)
        rows = []
        for offset, item in enumerate(items):
            position = known.get(item.id, first + offset)
            rows.append(
                [
                    project,
                    dataset_id,
                    item.id,
                    position,
                    json.dumps(item.input_variables, ensure_ascii=False),
                    None
                    if item.expected_output is None
                    else json.dumps(item.expected_output, ensure_ascii=False),
                    json.dumps(item.metadata, ensure_ascii=False),
                    item.source_request_id,
                    item.created_at,
                    written,
                    0,
                ]
            )
        self._client.insert(
            self._items,
            rows,
            column_names=_ITEM_COLUMNS,
            column_type_names=DATASET_ITEMS.column_types(_ITEM_COLUMNS),
            settings=self._write,
        )

    def positions(self, project: str, dataset_id: str, ids: Sequence[str]) -> dict[str, int]:
        """Return the positions of those of ``ids`` already in the dataset (deleted included:
        an item added back keeps its place)."""
        if not ids:
            return {}
        result = self._client.query(
            f"SELECT id, min(position) FROM {self._items} WHERE project = {{p:String}} "
            "AND dataset_id = {d:String} AND id IN {ids:Array(String)} GROUP BY id",
            parameters={"p": project, "d": dataset_id, "ids": list(ids)},
            settings=self._read,
        )
        return {str(r[0]): int(r[1]) for r in result.result_rows}

    def delete_item(self, project: str, dataset_id: str, item: ItemRow) -> WriteOutcome:
        """Store an item's tombstone; answers as :meth:`put` does."""
        return direct_write(lambda: self._delete_item(project, dataset_id, item))

    def _delete_item(self, project: str, dataset_id: str, item: ItemRow) -> None:
        self._client.insert(
            self._items,
            [
                [
                    project,
                    dataset_id,
                    item.id,
                    item.position,
                    "{}",
                    None,
                    "{}",
                    None,
                    item.created_at,
                    datetime.now(UTC),
                    1,
                ]
            ],
            column_names=_ITEM_COLUMNS,
            column_type_names=DATASET_ITEMS.column_types(_ITEM_COLUMNS),
            settings=self._write,
        )

    def items(
        self,
        project: str,
        dataset_id: str,
        after: tuple[int, str] | None = None,
        limit: int | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[ItemRow]:
        """Return live items in the order added, after ``after`` (position, id); ``ids`` only."""
        where = ["project = {p:String}", "dataset_id = {d:String}", "is_deleted = 0"]
        params: dict[str, Any] = {"p": project, "d": dataset_id}
        if after is not None:
            where.append("(position, id) > ({ap:UInt64}, {aid:String})")
            params.update(ap=after[0], aid=after[1])
        if ids is not None:
            where.append("id IN {ids:Array(String)}")
            params["ids"] = list(ids)
        tail = " ORDER BY position, id"
        if limit is not None:
            tail += " LIMIT {limit:UInt32}"
            params["limit"] = limit
        result = self._client.query(
            "SELECT id, position, input_variables, expected_output, metadata, source_request_id, "
            f"created_at FROM {self._items} FINAL WHERE {' AND '.join(where)}{tail}",
            parameters=params,
            settings=self._read,
        )
        return [
            ItemRow(
                id=str(r[0]),
                position=int(r[1]),
                input_variables=json.loads(r[2]),
                expected_output=None if r[3] is None else json.loads(r[3]),
                metadata=json.loads(r[4]),
                source_request_id=r[5],
                created_at=_utc(r[6]),
            )
            for r in result.result_rows
        ]
