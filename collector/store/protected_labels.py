"""Each project's protected labels: the labels only an admin may attach, move or remove.

One row per change, the newest of a project wins (``argMax`` on read; the replacing merge keeps
only it in time). Rows are only added, so two collectors writing at once cannot corrupt it:
the later write is the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, quote
from .writes import WriteOutcome, direct_write

PROTECTED_LABELS = Table(
    name="protected_labels",
    columns=(
        "project String",
        "labels Array(String)",
        "updated_at DateTime64(6, 'UTC')",
        "updated_by String",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="project",
)


@dataclass(frozen=True)
class ProtectedLabelsRow:
    """A project's protected labels as last set, by whom and when (None: never set)."""

    project: str
    labels: tuple[str, ...]
    updated_at: datetime | None
    updated_by: str


class ProtectedLabelStore:
    """Reads and writes ``protected_labels``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(PROTECTED_LABELS.name)}"
        # As for key revocations: on a cluster the next read sees the write whichever replica
        # answers it.
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read_settings: dict[str, Any] = (
            {"select_sequential_consistency": 1} if cluster else {}
        )

    def get(self, project: str) -> ProtectedLabelsRow:
        """The project's protected labels (none, if never set)."""
        rows = self._client.query(
            "SELECT argMax(labels, updated_at), max(updated_at), argMax(updated_by, updated_at), "
            f"count() FROM {self._table} WHERE project = {{p:String}}",
            parameters={"p": project},
            settings=self._read_settings,
        ).result_rows
        labels, updated_at, updated_by, count = rows[0]
        if not count:
            return ProtectedLabelsRow(project, (), None, "")
        return ProtectedLabelsRow(project, tuple(labels), updated_at, str(updated_by))

    def put(self, row: ProtectedLabelsRow) -> WriteOutcome:
        """Store a project's new list; answers as :meth:`KeyStore.insert` does."""
        return direct_write(
            lambda: self._client.insert(
                self._table,
                [[row.project, list(row.labels), row.updated_at, row.updated_by]],
                column_names=PROTECTED_LABELS.inserted_columns(),
                settings=self._write_settings,
            )
        )
