"""``client.requests``: the request log (spec 4.5, docs/api-notes.md, "Request log").

Log records of calls run elsewhere, then list, fetch, search, export, delete and aggregate
them. Each endpoint is described once, by a function returning a
:class:`~promptrail._api_call.Call`; :class:`Requests` and :class:`AsyncRequests` only send them.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, Unpack

from .._api_call import (
    Call,
    DateLike,
    Page,
    body_of,
    content,
    data_list_of,
    data_of,
    filters_text,
    jsonable,
    metadata_params,
    page_of,
    params,
    segment,
)
from .._http import AsyncHTTP, SyncHTTP
from .._types import (
    AnalyticsResult,
    BatchResult,
    Environment,
    Export,
    RequestLog,
    RequestRecord,
    RequestsDeleted,
    SearchHit,
)

ExportFormat = Literal["csv", "json"]
Metric = Literal["cost", "usage", "latency", "errors", "score"]


def score_filter_value(key: str, value: Any) -> Any:
    """A score filter's value as the collector reads it: True/False as a boolean score's text
    (``"true"``/``"false"``, what ``score.<name>`` matches), or as 1/0 for a ``.min``/``.max``
    bound (a boolean score's mean counts true as 1); any other value as it is."""
    if not isinstance(value, bool):
        return value
    if key.endswith((".min", ".max")):
        return int(value)
    return "true" if value else "false"


def score_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    """Filters given as one object (an export's, a dataset's from the log): each
    ``score.<name>[.min|.max]`` value as the collector reads it, the other keys as they are."""
    return {
        key: score_filter_value(key, value) if key.startswith("score.") else value
        for key, value in filters.items()
    }


# -- the calls ---------------------------------------------------------------------------------


def _log(record: Mapping[str, Any]) -> Call[RequestRecord]:
    return Call("POST", "/v1/requests", data_of(RequestRecord), body=body_of(**record))


def _log_batch(records: Iterable[Mapping[str, Any]]) -> Call[BatchResult]:
    body = {"records": [body_of(**record) for record in records]}
    return Call("POST", "/v1/requests/batch", data_of(BatchResult), body=body)


def _get(request_id: str) -> Call[RequestRecord]:
    return Call("GET", f"/v1/requests/{segment(request_id)}", data_of(RequestRecord))


def _list_page(
    limit: int | None,
    prompt_name: str | None,
    status: str | None,
    start_date: DateLike | None,
    end_date: DateLike | None,
    metadata: Mapping[str, Any] | None,
    trace_id: str | None,
    scores: Mapping[str, Any] | None = None,
    unscored: str | None = None,
    kind: str | None = None,
    environment: str | None = None,
) -> Callable[[str | None], Call[Page[RequestRecord]]]:
    def page(cursor: str | None) -> Call[Page[RequestRecord]]:
        query = params(
            limit=limit,
            cursor=cursor,
            prompt_name=prompt_name,
            status=status,
            start_date=start_date,
            end_date=end_date,
            trace_id=trace_id,
            unscored=unscored,
            kind=kind,
            environment=environment,
        )
        query += metadata_params(metadata)
        query += params(
            **{f"score.{key}": score_filter_value(key, v) for key, v in (scores or {}).items()}
        )
        return Call("GET", "/v1/requests", page_of(RequestRecord), params=query)

    return page


def _search_page(
    query: str, limit: int | None, environment: str | None = None
) -> Callable[[str | None], Call[Page[SearchHit]]]:
    def page(cursor: str | None) -> Call[Page[SearchHit]]:
        found = params(query=query, limit=limit, cursor=cursor, environment=environment)
        return Call("GET", "/v1/requests/search", page_of(SearchHit), params=found)

    return page


def _export(
    format: ExportFormat, filters: Mapping[str, Any] | None, include_metadata: bool | None
) -> Call[Export]:
    given = None if filters is None else score_filters(filters)
    body = body_of(format=format, filters=given, include_metadata=include_metadata)
    return Call("POST", "/v1/requests/export", data_of(Export), body=body)


def _environments() -> Call[list[Environment]]:
    return Call("GET", "/v1/environments", data_list_of(Environment))


def _export_status(export_id: str) -> Call[Export]:
    return Call("GET", f"/v1/requests/exports/{segment(export_id)}", data_of(Export))


def _download(export_id: str) -> Call[bytes]:
    return Call("GET", f"/v1/requests/exports/{segment(export_id)}/download", content)


def _delete(metadata: Mapping[str, Any]) -> Call[RequestsDeleted]:
    body = {"metadata": jsonable(dict(metadata))}
    return Call("DELETE", "/v1/requests", data_of(RequestsDeleted), body=body)


def _analytics(
    metric: str,
    group_by: str | None,
    start_date: DateLike | None,
    end_date: DateLike | None,
    filters: Mapping[str, Any] | None,
    score_name: str | None = None,
) -> Call[AnalyticsResult]:
    query = params(
        metric=metric,
        score_name=score_name,
        group_by=group_by,
        start_date=start_date,
        end_date=end_date,
        filters=filters_text(filters),
    )
    return Call("GET", "/v1/requests/analytics", data_of(AnalyticsResult), params=query)


class _ExportWait:
    """Decide, poll by poll, whether waiting for an export is over (the twins only sleep)."""

    def __init__(self, export_id: str, timeout: float) -> None:
        self._export_id = export_id
        self._timeout = timeout
        self._deadline = time.monotonic() + timeout

    def over(self, export: Export) -> bool:
        """Return True once ``export`` is no longer processing; past the deadline, raise."""
        if export.status != "processing":
            return True
        if time.monotonic() >= self._deadline:
            raise TimeoutError(f"export {self._export_id} still processing after {self._timeout} s")
        return False


# -- sync --------------------------------------------------------------------------------------


class Requests:
    """Log request records and query the request log."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def log(self, **record: Unpack[RequestLog]) -> RequestRecord:
        """Log one record of a call you ran yourself; return it as the detail shows it.

        >>> client.requests.log(prompt_name="greet", model="gpt-4o-mini", output="Hello Ada")
        """
        return self._http.call(_log(record))

    def log_batch(self, records: Iterable[RequestLog | Mapping[str, Any]]) -> BatchResult:
        """Log many records; rejected ones are reported by index and never drop the others.

        Raise :class:`promptrail.ValidationError` (``details.rejected``) if every one is refused.
        """
        return self._http.call(_log_batch(records))

    def get(self, request_id: str) -> RequestRecord:
        """Return one record with its model, timing and integration."""
        return self._http.call(_get(request_id))

    def list(
        self,
        *,
        prompt_name: str | None = None,
        status: Literal["success", "error"] | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
        limit: int | None = None,
        scores: Mapping[str, Any] | None = None,
        unscored: str | None = None,
        kind: str | None = None,
        environment: str | None = None,
    ) -> Iterator[RequestRecord]:
        """Iterate over records, newest first, fetching pages of ``limit`` as needed.

        ``metadata`` keeps records carrying every given key/value pair; ``trace_id`` the
        records of one trace. ``scores`` filters by score (own and trace's):
        ``{"helpfulness.min": 0.5, "helpfulness.max": 1, "thumbs": True}`` (``<name>.min`` /
        ``.max`` bound the mean, ``<name>`` matches a category or True/False); ``unscored``
        keeps records with no score of that name (a review queue). The log lists model calls
        (kinds ``llm``, ``embedding``) unless ``kind`` names others (comma-separated, or
        ``all``); a trace's records are of every kind. ``environment`` keeps those environments
        (comma-separated, or ``all``); without it, every one but the service's own
        (``promptrail-...``).
        """
        page = _list_page(
            limit,
            prompt_name,
            status,
            start_date,
            end_date,
            metadata,
            trace_id,
            scores,
            unscored,
            kind,
            environment,
        )
        return self._http.paginate(page)

    def search(
        self, query: str, *, limit: int | None = None, environment: str | None = None
    ) -> Iterator[SearchHit]:
        """Iterate over records whose variables, output, metadata or input contain ``query``
        (``environment`` as :meth:`list` takes it)."""
        return self._http.paginate(_search_page(query, limit, environment))

    def environments(self) -> builtins.list[Environment]:
        """Return every environment of the project's records (the service's own too), by
        name, with how many records each holds."""
        return self._http.call(_environments())

    def export(
        self,
        *,
        format: ExportFormat = "csv",
        filters: Mapping[str, Any] | None = None,
        include_metadata: bool | None = None,
    ) -> Export:
        """Start exporting matching records as CSV or JSON lines; return the job."""
        return self._http.call(_export(format, filters, include_metadata))

    def export_status(self, export_id: str) -> Export:
        """Return an export job's status (``download_url`` once completed)."""
        return self._http.call(_export_status(export_id))

    def wait_for_export(
        self, export_id: str, *, timeout: float = 60.0, poll_interval: float = 0.5
    ) -> Export:
        """Poll an export until it is no longer processing; raise TimeoutError after ``timeout``."""
        wait = _ExportWait(export_id, timeout)
        while not wait.over(export := self.export_status(export_id)):
            time.sleep(poll_interval)
        return export

    def download(self, export_id: str) -> bytes:
        """Return the file of a completed export."""
        return self._http.call(_download(export_id))

    def delete(self, metadata: Mapping[str, Any]) -> RequestsDeleted:
        """Delete every record whose metadata has all the given pairs (never everything)."""
        return self._http.call(_delete(metadata))

    def analytics(
        self,
        metric: Metric,
        *,
        group_by: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        filters: Mapping[str, Any] | None = None,
        score_name: str | None = None,
    ) -> AnalyticsResult:
        """Aggregate cost, usage, latency, errors or a score over a period (default: 30 days).

        ``group_by``: prompt_name, model, status, version, day, hour or ``metadata.<key>``;
        ``filters``: prompt_name, model, status, metadata. ``metric="score"`` with
        ``score_name``: the mean of that score (``score_count`` scores), by group.
        """
        call = _analytics(metric, group_by, start_date, end_date, filters, score_name)
        return self._http.call(call)


# -- async -------------------------------------------------------------------------------------


class AsyncRequests:
    """Log request records and query the request log (``await`` each)."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def log(self, **record: Unpack[RequestLog]) -> RequestRecord:
        """Log one record of a call you ran yourself (see :meth:`Requests.log`)."""
        return await self._http.call(_log(record))

    async def log_batch(self, records: Iterable[RequestLog | Mapping[str, Any]]) -> BatchResult:
        """Log many records (see :meth:`Requests.log_batch`)."""
        return await self._http.call(_log_batch(records))

    async def get(self, request_id: str) -> RequestRecord:
        """Return one record with its model, timing and integration."""
        return await self._http.call(_get(request_id))

    def list(
        self,
        *,
        prompt_name: str | None = None,
        status: Literal["success", "error"] | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
        limit: int | None = None,
        scores: Mapping[str, Any] | None = None,
        unscored: str | None = None,
        kind: str | None = None,
        environment: str | None = None,
    ) -> AsyncIterator[RequestRecord]:
        """Iterate (``async for``) over records, newest first (see :meth:`Requests.list`)."""
        page = _list_page(
            limit,
            prompt_name,
            status,
            start_date,
            end_date,
            metadata,
            trace_id,
            scores,
            unscored,
            kind,
            environment,
        )
        return self._http.paginate(page)

    def search(
        self, query: str, *, limit: int | None = None, environment: str | None = None
    ) -> AsyncIterator[SearchHit]:
        """Iterate (``async for``) over records containing ``query``."""
        return self._http.paginate(_search_page(query, limit, environment))

    async def environments(self) -> builtins.list[Environment]:
        """Return every environment of the project's records (the service's own too), by
        name, with how many records each holds."""
        return await self._http.call(_environments())

    async def export(
        self,
        *,
        format: ExportFormat = "csv",
        filters: Mapping[str, Any] | None = None,
        include_metadata: bool | None = None,
    ) -> Export:
        """Start exporting matching records as CSV or JSON lines; return the job."""
        return await self._http.call(_export(format, filters, include_metadata))

    async def export_status(self, export_id: str) -> Export:
        """Return an export job's status (``download_url`` once completed)."""
        return await self._http.call(_export_status(export_id))

    async def wait_for_export(
        self, export_id: str, *, timeout: float = 60.0, poll_interval: float = 0.5
    ) -> Export:
        """Poll an export until it is no longer processing; raise TimeoutError after ``timeout``."""
        wait = _ExportWait(export_id, timeout)
        while not wait.over(export := await self.export_status(export_id)):
            await asyncio.sleep(poll_interval)
        return export

    async def download(self, export_id: str) -> bytes:
        """Return the file of a completed export."""
        return await self._http.call(_download(export_id))

    async def delete(self, metadata: Mapping[str, Any]) -> RequestsDeleted:
        """Delete every record whose metadata has all the given pairs (never everything)."""
        return await self._http.call(_delete(metadata))

    async def analytics(
        self,
        metric: Metric,
        *,
        group_by: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        filters: Mapping[str, Any] | None = None,
        score_name: str | None = None,
    ) -> AnalyticsResult:
        """Aggregate the request log over a period (see :meth:`Requests.analytics`)."""
        call = _analytics(metric, group_by, start_date, end_date, filters, score_name)
        return await self._http.call(call)
