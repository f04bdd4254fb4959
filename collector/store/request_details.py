"""One record's detail read: the record by id (waiting for the inserts under way when its
id is not indexed yet) and its scores, read beside it on a handle of its own.

Apart from the list pages and the writes of :mod:`.requests` because a detail is a point read
with its own handle and threads; :class:`.requests.RequestStore` takes it in as a base class,
so a detail's reads stay methods of the store (the tests replace ``_get`` on a store).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .connection import close_client, open_client
from .request_hints import InsertsUnderWay
from .request_rows import DETAIL_COLUMNS, RequestRow, group_copies, item_row
from .score_rows import ScoreRow
from .score_sql import live_on_targets, score_versions


class RecordDetails:
    """The detail reads of the request store (its base class: the store sets these)."""

    _client: Client
    items_table: str
    ids_table: str
    scores_by_target: str
    # The inserts under way into the log (see :meth:`get`), and how scores are read.
    _under_way: InsertsUnderWay
    _score_read: dict[str, Any]
    # The side handle and its threads, opened by the first detail (see _beside).
    _side: Client | None
    _side_pool: ThreadPoolExecutor | None
    _side_lock: threading.Lock

    def get(self, project: str, request_id: str, at: datetime | None = None) -> RequestRow | None:
        """Return one live record.

        ``at`` is its created_at when the id tells it (service-made ids); otherwise the id
        index says where the record sits, and ``request_items`` is read on the full key.

        One insert into ``requests`` fills ``request_items`` (what lists read) and
        ``request_ids`` through two views, and ClickHouse makes each view's part visible on
        its own, in no set order: for a moment a listed record can be missing from the id
        index. So a miss by id waits for the inserts of this collector that were under way
        when the read began to end (all of an insert's parts are visible once it returns)
        and looks once more. Those, not the ones running at the miss: the insert of a record
        listed before the read either ran then or had ended, and an insert ending between
        the miss and a look at what runs would otherwise leave its record unread (a 404 in
        ~20,000 reads did just that).
        """
        running = self._under_way.running() if at is None else frozenset()
        found = self._get(project, request_id, at)
        if found is None and running:
            self._under_way.wait(running)
            found = self._get(project, request_id, at)
        return found

    def get_with_scores(
        self, project: str, request_id: str, at: datetime | None = None
    ) -> tuple[RequestRow, list[ScoreRow]] | None:
        """Return one live record, as :meth:`get` does, and its live scores (its own and its
        trace's, newest first).

        The record's own scores are read beside the record, on a handle of their own, at the
        same time (a detail paid the two reads one after the other); its trace's, when it has
        a trace, once the record names it.
        """
        # At a record id only the record's own scores are keyed: one key read, no span lookup.
        own = self._beside(
            score_versions(self.scores_by_target, "project", "[{id:String}]", traces=None),
            {"project": project, "id": request_id},
        )
        row = self.get(project, request_id, at)
        versions = list(own.result())
        if row is None:
            return None
        if row.trace_id:
            versions += self._client.query(
                score_versions(self.scores_by_target, "project", "[{trace:String}]"),
                parameters={"project": project, "trace": row.trace_id},
                settings=self._score_read,
            ).result_rows
        return row, live_on_targets(project, versions, [row.id], [row.trace_id or ""])

    def _beside(self, sql: str, params: dict[str, Any]) -> Future[Sequence[Sequence[Any]]]:
        """Run a read on the side handle, in a thread of the store's pool; its rows.

        A chDB handle runs one call at a time: the embedded store's side reads get a handle
        of their own, opened on first use. A server's client runs calls concurrently.
        """
        with self._side_lock:
            if self._side is None:
                # The client itself, not the journal's settling wrapper of it.
                client = getattr(self._client, "wrapped", self._client)
                embedded = type(client).__name__ == "ChdbClient"
                self._side = open_client(self._client.uri) if embedded else self._client
                self._side_pool = ThreadPoolExecutor(2, thread_name_prefix="detail-scores")
            side, pool = self._side, self._side_pool
        assert pool is not None
        return pool.submit(
            lambda: side.query(sql, parameters=params, settings=self._score_read).result_rows
        )

    def close(self) -> None:
        """Close the side handle and its threads, if a detail opened them."""
        with self._side_lock:
            side, pool, self._side, self._side_pool = self._side, self._side_pool, None, None
        if pool is not None:
            pool.shutdown()
        if side is not None and side is not self._client:
            close_client(side)

    def _get(self, project: str, request_id: str, at: datetime | None) -> RequestRow | None:
        params: dict[str, Any] = {"project": project, "id": request_id}
        settings: dict[str, Any] = {}
        if at is not None:
            at_clause = "created_at = {at:DateTime64(3, 'UTC')}"
            params["at"] = at
        else:
            # ClickHouse builds the subquery's set first and prunes partitions and granules of
            # ``request_items`` by it. On a cluster a record's id entry lives on its shard.
            at_clause = (
                f"created_at IN (SELECT created_at FROM {self.ids_table} "
                "WHERE project = {project:String} AND id = {id:String})"
            )
            settings["distributed_product_mode"] = "local"
        rows = [
            tuple(r)
            for r in self._client.query(
                f"SELECT {DETAIL_COLUMNS}, is_deleted FROM {self.items_table} "
                f"WHERE project = {{project:String}} AND {at_clause} AND id = {{id:String}} "
                "ORDER BY created_at DESC",
                parameters=params,
                settings=settings,
            ).result_rows
        ]
        # Copies of the record (and its tombstone) share a created_at; an id a client logged
        # at two times names two records, of which the newest live one is shown.
        live = [run[0] for run in group_copies(rows) if not any(row[-1] for row in run)]
        return item_row(live[0], detail=True) if live else None
