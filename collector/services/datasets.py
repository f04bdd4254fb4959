"""Datasets and items (docs/api-notes.md, "Datasets and experiments"): the rules between routes and
store.

Names are unique per project (409 DATASET_ALREADY_EXISTS); ``{name}`` in a path also takes the
id; an unknown one is 404 DATASET_NOT_FOUND. Items are upserted by id and listed in the order
they were first added. Items made from the log read the request list with its own filters
(score filters included) and take the record's id as the item's, so adding a record twice
makes one item.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import ContractError, DatasetAlreadyExists, DatasetNotFound, ValidationFailed
from ..models.datasets import DatasetIn, FromRequestsIn, ItemIn
from ..store.datasets import DatasetRow, DatasetStore, ItemRow
from ..store.writes import WriteOutcome
from .cursors import CursorCodec, time_key
from .ingest import rejection_of
from .refused_writes import raise_if_refused
from .requests import RequestService, is_score_param, request_filter, score_tests

_ITEM_IN: TypeAdapter[ItemIn] = TypeAdapter(ItemIn)
# Records read per page when items are made from the log.
_LOG_PAGE = 500


def new_dataset_id() -> str:
    """Return ``dataset_<32 hex>``."""
    return f"dataset_{os.urandom(16).hex()}"


def new_item_id() -> str:
    """Return an item id for an item posted without one."""
    return f"item_{os.urandom(12).hex()}"


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class DatasetService:
    """Create, list, read and delete datasets; add, list and delete their items."""

    def __init__(
        self,
        store: DatasetStore,
        requests: RequestService,
        cursor_secret: str,
        retry_after_seconds: int = 2,
    ) -> None:
        """A write the store refuses answers 503 ``STORE_UNAVAILABLE`` asking the client to
        come back in ``retry_after_seconds`` (Settings.store_retry_after_seconds)."""
        self._store = store
        self._retry_after = retry_after_seconds
        self._requests = requests
        self._cursors = CursorCodec(cursor_secret, "datasets")
        self._item_cursors = CursorCodec(cursor_secret, "dataset items")

    # -- datasets --------------------------------------------------------------------------

    def create(self, project: str, body: DatasetIn) -> DatasetRow:
        """Store a new dataset; 409 when a live one has the name."""
        if self._store.find(project, body.name) is not None:
            raise DatasetAlreadyExists(body.name)
        row = DatasetRow(
            id=new_dataset_id(),
            name=body.name,
            description=body.description,
            metadata=body.metadata,
            created_at=_now_ms(),
        )
        self._stored(self._store.put(project, row))
        return row

    def get(self, project: str, ref: str) -> DatasetRow:
        """Return the dataset named (or with the id) ``ref``, or 404 DATASET_NOT_FOUND."""
        row = self._store.find(project, ref)
        if row is None:
            raise DatasetNotFound(ref)
        return row

    def page(
        self, project: str, limit: int, cursor: str | None
    ) -> tuple[list[DatasetRow], str | None]:
        """Return a page of datasets, newest first, and the next page's cursor."""
        after = self._cursors.after_time(cursor)
        rows = self._store.page(project, after, limit + 1)
        return self._cursors.next_page(rows, limit, lambda r: time_key(r.created_at, r.id))

    def delete(self, project: str, ref: str) -> DatasetRow:
        """Delete a dataset; return what it was."""
        row = self.get(project, ref)
        self._stored(self._store.put(project, row, deleted=True))
        return row

    # -- items -----------------------------------------------------------------------------

    def add_items(
        self, project: str, ref: str, items: Sequence[Any]
    ) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """Store every valid item; return how many and the rejected (index, error)."""
        dataset = self.get(project, ref)
        rows: dict[str, ItemRow] = {}
        rejected: list[tuple[int, dict[str, Any]]] = []
        now = _now_ms()
        for index, raw in enumerate(items):
            try:
                item = _ITEM_IN.validate_python(raw)
            except ValidationError as exc:
                rejected.append((index, rejection_of(exc, "item")))
                continue
            except ContractError as exc:
                rejected.append((index, exc.body()["error"]))
                continue
            item_id = item.id or new_item_id()
            # The same id twice in one post: the later one wins, at the earlier one's place.
            rows[item_id] = ItemRow(
                id=item_id,
                position=0,
                input_variables=item.input_variables,
                expected_output=item.expected_output,
                metadata=item.metadata,
                source_request_id=None,
                created_at=now,
            )
        self._stored(self._store.put_items(project, dataset.id, list(rows.values())))
        return len(items) - len(rejected), rejected

    def items_page(
        self, project: str, ref: str, limit: int, cursor: str | None
    ) -> tuple[list[ItemRow], str | None]:
        """Return a page of a dataset's items in the order added, and the next cursor."""
        dataset = self.get(project, ref)
        after = self._item_cursors.after(cursor, lambda p: (int(p["pos"]), str(p["id"])))
        rows = self._store.items(project, dataset.id, after, limit + 1)
        return self._item_cursors.next_page(rows, limit, lambda r: {"pos": r.position, "id": r.id})

    def all_items(self, project: str, dataset_id: str) -> list[ItemRow]:
        """Return every live item of a dataset, in order."""
        return self._store.items(project, dataset_id)

    def items_by_id(self, project: str, dataset_id: str, ids: Sequence[str]) -> dict[str, ItemRow]:
        """Return the live items of ``ids`` by id."""
        return {i.id: i for i in self._store.items(project, dataset_id, ids=ids)}

    def delete_item(self, project: str, ref: str, item_id: str) -> ItemRow:
        """Delete one item; 404 DATASET_NOT_FOUND naming the item when it is not there."""
        dataset = self.get(project, ref)
        found = self._store.items(project, dataset.id, ids=[item_id])
        if not found:
            raise DatasetNotFound(f"{dataset.name}/items/{item_id}")
        self._stored(self._store.delete_item(project, dataset.id, found[0]))
        return found[0]

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "datasets")

    def add_from_requests(self, project: str, ref: str, body: FromRequestsIn) -> int:
        """Make items of the records the filters select (newest first, up to ``limit``)."""
        dataset = self.get(project, ref)
        filters = body.filters
        score_params: list[tuple[str, str]] = []
        for key, value in (filters.model_extra or {}).items():
            if not is_score_param(key):
                raise ValidationFailed(
                    f"filters.{key}",
                    "unknown filter: use prompt_name, status, start_date, end_date, metadata, "
                    "score.<name>[.min|.max] or unscored",
                )
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ValidationFailed(f"filters.{key}", f"{key} takes a string or a number")
            score_params.append((key, str(value)))
        # Checked here first so that a bad filter's error names it as the body spells it.
        request_filter(
            start_date=filters.start_date, end_date=filters.end_date, field_prefix="filters."
        )
        score_tests(score_params, field_prefix="filters.")
        now = _now_ms()
        rows: list[ItemRow] = []
        cursor: str | None = None
        while len(rows) < body.limit:
            page = self._requests.list_page(
                project,
                min(_LOG_PAGE, body.limit - len(rows)),
                cursor,
                prompt_name=filters.prompt_name,
                status=filters.status,
                start_date=filters.start_date,
                end_date=filters.end_date,
                metadata=filters.metadata,
                score_params=score_params,
            )
            for record in page.rows:
                content = record.output.get("content") if record.output else None
                rows.append(
                    ItemRow(
                        id=record.id,
                        position=0,
                        input_variables=record.input_variables,
                        expected_output=content
                        if body.output_as_expected and content is not None
                        else None,
                        metadata={},
                        source_request_id=record.id,
                        created_at=now,
                    )
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        self._stored(self._store.put_items(project, dataset.id, rows))
        return len(rows)
