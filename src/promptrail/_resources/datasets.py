"""``client.datasets``: datasets and their items (docs/api-notes.md, "Datasets and experiments").

Each endpoint is described once, by a function returning a :class:`~promptrail._api_call.Call`;
:class:`Datasets` and :class:`AsyncDatasets` only send them. ``name`` takes a dataset's name
or its id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any

from .._api_call import Call, Page, body_of, data_of, page_of, params, segment
from .._http import AsyncHTTP, SyncHTTP
from .._types import BatchResult, Dataset, DatasetItem, ItemsAccepted
from .requests import score_filters

# The wire models live in promptrail._types (beside the rest, compared with the collector's by
# tests/sdk/test_wire_models.py); importers that name them from here keep working.
__all__ = ["AsyncDatasets", "Dataset", "DatasetItem", "Datasets"]

# -- the calls ---------------------------------------------------------------------------------


def _path(name: str, *rest: str) -> str:
    return "/".join(["/v1/datasets", segment(name), *(segment(part) for part in rest)])


def _create(
    name: str, description: str | None, metadata: Mapping[str, Any] | None
) -> Call[Dataset]:
    body = body_of(name=name, description=description, metadata=metadata)
    return Call("POST", "/v1/datasets", data_of(Dataset), body=body)


def _list_page(limit: int | None) -> Callable[[str | None], Call[Page[Dataset]]]:
    return lambda cursor: Call(
        "GET", "/v1/datasets", page_of(Dataset), params=params(limit=limit, cursor=cursor)
    )


def _items_page(name: str, limit: int | None) -> Callable[[str | None], Call[Page[DatasetItem]]]:
    return lambda cursor: Call(
        "GET", _path(name, "items"), page_of(DatasetItem), params=params(limit=limit, cursor=cursor)
    )


def _add_items(name: str, items: Iterable[Mapping[str, Any]]) -> Call[BatchResult]:
    body = {"items": [body_of(**item) for item in items]}
    return Call("POST", _path(name, "items"), data_of(BatchResult), body=body)


def _from_requests(
    name: str, filters: Mapping[str, Any] | None, limit: int | None, output_as_expected: bool
) -> Call[ItemsAccepted]:
    given = score_filters(filters or {})
    body = body_of(filters=given, limit=limit, output_as_expected=output_as_expected)
    return Call("POST", _path(name, "items", "from-requests"), data_of(ItemsAccepted), body=body)


# -- sync --------------------------------------------------------------------------------------


class Datasets:
    """Create, list, read and delete datasets; add, list and delete their items."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Create a dataset (:class:`promptrail.ConflictError` if the name is taken).

        >>> client.datasets.create("support-hard-cases", description="thumbed down")
        """
        return self._http.call(_create(name, description, metadata))

    def list(self, *, limit: int | None = None) -> Iterator[Dataset]:
        """Iterate over datasets, newest first."""
        return self._http.paginate(_list_page(limit))

    def get(self, name: str) -> Dataset:
        """Return one dataset by name or id."""
        return self._http.call(Call("GET", _path(name), data_of(Dataset)))

    def delete(self, name: str) -> Dataset:
        """Delete a dataset; return what it was."""
        return self._http.call(Call("DELETE", _path(name), data_of(Dataset)))

    def add_items(self, name: str, items: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Add items (``input_variables``, ``expected_output``, ``metadata``, ``id``); an id
        added again replaces its item in place. Bad items are rejected by index.

        >>> client.datasets.add_items("qa", [{"input_variables": {"q": "2+2"},
        ...                                   "expected_output": "4"}])
        """
        return self._http.call(_add_items(name, items))

    def add_from_requests(
        self,
        name: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        output_as_expected: bool = False,
    ) -> int:
        """Add the records the request list's filters select (``prompt_name``, ``status``,
        dates, ``metadata``, ``score.<name>[.min|.max]``, ``unscored``); return how many.

        ``score.<name>`` matches a category, or True/False for a boolean score (a thumbs).

        >>> client.datasets.add_from_requests(
        ...     "fix-these", filters={"prompt_name": "support-reply", "score.thumbs": False},
        ...     output_as_expected=True)
        """
        return self._http.call(_from_requests(name, filters, limit, output_as_expected)).accepted

    def items(self, name: str, *, limit: int | None = None) -> Iterator[DatasetItem]:
        """Iterate over a dataset's items in the order they were added."""
        return self._http.paginate(_items_page(name, limit))

    def delete_item(self, name: str, item_id: str) -> DatasetItem:
        """Delete one item; return what it was."""
        return self._http.call(Call("DELETE", _path(name, "items", item_id), data_of(DatasetItem)))


# -- async -------------------------------------------------------------------------------------


class AsyncDatasets:
    """:class:`Datasets` with ``await``."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def create(
        self,
        name: str,
        *,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Create a dataset."""
        return await self._http.call(_create(name, description, metadata))

    def list(self, *, limit: int | None = None) -> AsyncIterator[Dataset]:
        """Iterate over datasets, newest first."""
        return self._http.paginate(_list_page(limit))

    async def get(self, name: str) -> Dataset:
        """Return one dataset by name or id."""
        return await self._http.call(Call("GET", _path(name), data_of(Dataset)))

    async def delete(self, name: str) -> Dataset:
        """Delete a dataset; return what it was."""
        return await self._http.call(Call("DELETE", _path(name), data_of(Dataset)))

    async def add_items(self, name: str, items: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Add items; an id added again replaces its item in place."""
        return await self._http.call(_add_items(name, items))

    async def add_from_requests(
        self,
        name: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        output_as_expected: bool = False,
    ) -> int:
        """Add the records the request list's filters select; return how many."""
        found = await self._http.call(_from_requests(name, filters, limit, output_as_expected))
        return found.accepted

    def items(self, name: str, *, limit: int | None = None) -> AsyncIterator[DatasetItem]:
        """Iterate over a dataset's items in the order they were added."""
        return self._http.paginate(_items_page(name, limit))

    async def delete_item(self, name: str, item_id: str) -> DatasetItem:
        """Delete one item; return what it was."""
        path = _path(name, "items", item_id)
        return await self._http.call(Call("DELETE", path, data_of(DatasetItem)))
