"""The request log on ClickHouse: one wide, append-only table.

Idempotency: a record's identity is its sort key (project, created_at, id). Retried inserts
of a record add identical rows that ReplacingMergeTree collapses at merge time; until then
pages resolve the copies themselves (see :meth:`RequestStore.page`) and aggregates use FINAL.
A delete inserts a tombstone (row_version 2, is_deleted 1) over the same key, which hides the
record at once; a late retry of the original (row_version 1) can never bring it back.

The tables are defined in :mod:`.request_tables`, rows encoded and decoded in
:mod:`.request_rows`, filters written as SQL in :mod:`.request_filters`, metadata-filtered
pages planned in :mod:`.metadata_index`, and what the store keeps per process beside the log
(inserts under way, the newest record, score filters' density) in :mod:`.request_hints`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from clickhouse_connect.driver.client import Client

from .connection import close_client, open_client, utc
from .metadata_index import REQUEST_PROMPTS, MetadataIndex, by_prompt_index
from .request_details import RecordDetails
from .request_filters import (
    PAGE_READ,
    SLACK,
    RequestFilter,
    anchor_of,
    filter_where,
    keyset,
    like_escape,
    reach,
    widened,
    windows,
)
from .request_hints import DensityHints, density_key_of, inserts_into, newest_of
from .request_rows import (
    JSON_INPUT,
    LIST_COLUMNS,
    READ_COLUMNS,
    RequestRow,
    item_row,
    joined_rows,
    stored_row,
    whole_copies,
)
from .request_tables import COLUMNS, REQUEST_IDS, REQUEST_ITEMS, REQUEST_METADATA, REQUESTS
from .schema import quote
from .score_sql import (
    read_traced_names,
    sibling,
    tombstones_for_records,
)
from .score_tables import SCORES, SCORES_BY_TARGET
from .traced_score_names import TracedScoreNames
from .writes.log_journal import SettlingClient


class RequestStore(RecordDetails):
    """Every query of the request log and export tables."""

    def __init__(
        self,
        client: Client,
        database: str,
        cluster: str | None = None,
        traced_names: TracedScoreNames | None = None,
    ) -> None:
        """``traced_names``: the score store's, which learns of every score write of the
        process; by default one that asks the store each time for what it does not know.

        On the embedded store every query first settles the log's journal, if one is open
        (``writes/log_journal.py``): a read sees every record acknowledged before it."""
        self._database = database
        self._cluster = cluster
        self._journal_path = journal_path_of(client, database, cluster)
        if self._journal_path is not None:
            client = cast(Client, SettlingClient(client, self._journal_path))
        self._client = client
        # A second handle (and threads) for the reads a detail runs beside the record's:
        # see get_with_scores. Opened on first use.
        self._side: Client | None = None
        self._side_pool: ThreadPoolExecutor | None = None
        self._side_lock = threading.Lock()
        self._score_read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}
        db = quote(database)
        self.table = f"{db}.{quote(REQUESTS.name)}"
        self.items_table = f"{db}.{quote(REQUEST_ITEMS.name)}"
        self.metadata_table = f"{db}.{quote(REQUEST_METADATA.name)}"
        self.ids_table = f"{db}.{quote(REQUEST_IDS.name)}"
        self.scores_table = f"{db}.{quote(SCORES.name)}"
        self.scores_by_target = sibling(self.scores_table, SCORES_BY_TARGET.name)
        self.prompts_table = f"{db}.{quote(REQUEST_PROMPTS.name)}"
        self._index = MetadataIndex(
            client, self.metadata_table, self.items_table, self.prompts_table
        )
        self.traced_names = traced_names or TracedScoreNames(
            lambda project, names: read_traced_names(client, self.scores_table, project, names),
            sole_writer=False,
        )
        # A Distributed insert is acknowledged only once it reached the shards.
        self._insert_settings: dict[str, Any] = (
            {"distributed_foreground_insert": 1} if cluster else {}
        )
        # The inserts under way into this table, shared by every store of it in the process
        # (the embedded store inserts through a client of its own): see :meth:`get`.
        self._under_way = inserts_into(self.table)
        # The newest record's time, shared the same way: see request_hints.NewestHint.
        self._newest_hint = newest_of(self.items_table)
        self._densities = DensityHints()

    # -- writes ----------------------------------------------------------------------------

    def journal_path(self) -> Path | None:
        """Where the log's journal of this database lives (beside the engine's files), on the
        embedded store; None on a server, where no collector keeps local files."""
        return self._journal_path

    def applier(self) -> tuple[RequestStore, Callable[[], None]]:
        """The log on a client of its own (the journal's inserts), and what closes it."""
        client = open_client(self._client.uri)
        return RequestStore(client, self._database, self._cluster), lambda: close_client(client)

    def insert(self, batches: Sequence[bytes], settings: dict[str, Any] | None = None) -> None:
        """Insert batches of rows, each made by :func:`.request_rows.encode_rows`, in one block."""
        arrays = [batch for batch in batches if len(batch) > 2]  # "[]" holds no row
        if not arrays:
            return
        # JSONEachRow reads one JSON array of rows, or rows separated by commas: several
        # arrays are read as their contents in a row, a lone one as it is.
        body = arrays[0] if len(arrays) == 1 else joined_rows(arrays)
        ticket = self._under_way.begin()
        try:
            self._client.raw_insert(
                self.table,
                COLUMNS,
                body,
                settings={**JSON_INPUT, **self._insert_settings, **(settings or {})},
                fmt="JSONEachRow",
            )
        finally:
            self._under_way.end(ticket)

    def note_stored(self, newest: datetime | None) -> None:
        """Note records stored up to ``newest`` (their latest created_at): list pages count
        their windows back from the log's newest record (see :class:`.request_hints.NewestHint`)."""
        self._newest_hint.note(newest)

    def probe_insert(self) -> None:
        """Insert no rows: ClickHouse still runs its checks (too many parts, delays) on it."""
        self._client.raw_insert(
            self.table,
            COLUMNS,
            b"",
            settings={**JSON_INPUT, **self._insert_settings},
            fmt="JSONEachRow",
        )

    def created_at_of(
        self, project: str, ids: Sequence[str], since: datetime
    ) -> dict[str, datetime]:
        """Return the created_at of those ids stored since ``since`` (deleted included)."""
        if not ids:
            return {}
        rows = self._client.query(
            f"SELECT id, min(created_at) FROM {self.ids_table} "
            "WHERE project = {project:String} AND id IN {ids:Array(String)} "
            "AND created_at >= {since:DateTime64(3, 'UTC')} GROUP BY id",
            parameters={"project": project, "ids": list(ids), "since": since},
        ).result_rows
        return {str(r[0]): utc(r[1]) for r in rows}

    # -- reads (a record's detail: RecordDetails) ------------------------------------------

    def page(
        self,
        project: str,
        filters: RequestFilter,
        after: tuple[datetime, str] | None,
        limit: int,
        search: str | None = None,
    ) -> list[RequestRow]:
        """Return live records newest first, after a keyset position, optionally matching text.

        A metadata filter reads its candidates from the metadata index, a prompt filter (with
        no metadata, trace or score test) from the prompt index (:meth:`.MetadataIndex.page`);
        every other list reads ``request_items`` (``requests`` for a search) in key order. A
        list's rows carry the fields of a list item only (the rest keep their defaults); a
        search's rows are whole.

        FINAL would hide duplicates and tombstones but stops ClickHouse from reading the sort
        key backwards and from skipping granules by index, which costs many times over on a
        big log. So pages are read plainly, in key order, and each run of rows sharing one key
        is resolved here: a run is one record, gone if any of its rows is a tombstone. Only
        the last run of a fetch can be cut by LIMIT, so it is left for the next fetch.
        """
        if filters.scores:
            filters = self._trace_scored(project, filters)
        if search is None and (filters.metadata or by_prompt_index(filters)):
            return self._index.page(project, filters, after, limit)
        where, params = filter_where(project, filters)
        table, columns = self.items_table, LIST_COLUMNS
        build: Callable[[Sequence[Any]], RequestRow] = item_row
        # A score filter's page sizes its first window from the last page of it: DensityHints.
        density_key = density_key_of(project, filters) if filters.scores else None
        looked = True  # for the log's newest record: see below
        top: datetime | None = None  # of the span the next pass reads: see reach
        if search is not None:
            where += " AND search_text LIKE {needle:String}"
            params["needle"] = "%" + like_escape(search.lower()) + "%"
            # A hit's matched fields may be in the input: a search reads whole records.
            table, columns, build = self.table, READ_COLUMNS, stored_row
            lowers: list[datetime | None] = [None]  # a rare word is rarely in the newest day
        else:
            # From the log's newest record when it is older than now: a quiet log's first
            # window would otherwise find nothing (with a score filter, at the cost of its
            # score clause) before the page looks for where the log ends.
            newest, looked = self._newest_known()  # when read now, not again below
            lowers = windows(filters, after, newest)
            top = anchor_of(filters, after, newest)
            if density_key is not None:
                lowers = widened(
                    lowers, top, self._densities.get(density_key), limit, filters.start
                )
        anchor = top
        found: list[RequestRow] = []
        position = after
        # The bound above the next pass once a pass read everything down to its lower bound
        # (a cursor bounds the first pass's score sums too: 1 ms past, created_at has ms).
        upper = after[0] + timedelta(milliseconds=1) if after is not None else None
        fetch = limit + SLACK
        while len(found) < limit:
            lower = lowers[0]
            pass_where, pass_params = where, params
            if filters.scores and lower is not None:
                # A pass with a lower bound: score filters then read its records' sums only.
                pass_where, pass_params = filter_where(
                    project, filters, windowed=True, capped=upper is not None
                )
            rows = self._fetch(
                table, columns, pass_where, dict(pass_params), position, fetch, lower, upper
            )
            runs, complete = whole_copies(rows, fetch)
            if not runs and not complete:
                fetch *= 2  # one key holds a whole fetch of duplicates: read more at once
                continue
            had = len(found)
            for run in runs:
                if not any(row[-1] for row in run):
                    found.append(build(run[0]))
            if runs:
                last = runs[-1][0]
                position = (utc(last[1]), str(last[0]))
            if complete:
                # A run shares one created_at, so a window never cuts one.
                if lower is None:
                    break
                if filters.scores and top is not None:
                    lowers = reach(
                        lowers, (lower, top), len(found) - had, limit - len(found), filters.start
                    )
                else:
                    lowers = lowers[1:]
                # Everything from the window's bound up was read: the next pass starts below.
                top = upper = lower
                if not rows and not looked and position == after:
                    # Nothing at all in this page's windows so far: when the log has been
                    # quiet since before them (the hint was newer than the log: records
                    # gone), the next windows count back from its newest record instead
                    # (looked up once). Once a window read a row, the log ends above it.
                    looked = True
                    newest = self._newest()
                    self._newest_hint.read(newest)
                    if newest is not None and newest < lower:
                        lowers, top = windows(filters, position, newest), newest
        if density_key is not None and anchor is not None and found:
            page = found[:limit]
            span = (anchor - page[-1].created_at).total_seconds()
            if span > 0:
                self._densities.put(density_key, len(page) / span)
        return found[:limit]

    def _trace_scored(self, project: str, filters: RequestFilter) -> RequestFilter:
        """``filters`` knowing which of its score names have scores on traces: the others'
        tests then leave the trace half out of every pass."""
        names = {test.name for test in filters.scores}
        return replace(filters, scores_on_traces=self.names_scored_on_traces(project, names))

    def names_scored_on_traces(self, project: str, names: Iterable[str]) -> frozenset[str]:
        """Which of ``names`` have a score on a trace in the project (see
        :class:`TracedScoreNames`: a key read per name the process does not know yet)."""
        return self.traced_names.of(project, names)

    def _newest_known(self) -> tuple[datetime | None, bool]:
        """The log's newest time by the hint, read again once it is no longer trusted; and
        whether it was read now."""
        newest, trusted = self._newest_hint.current()
        if not trusted:
            newest = self._newest()
            self._newest_hint.read(newest)
        return newest, not trusted

    def _newest(self) -> datetime | None:
        """The time of the newest row of ``request_items``, any project's (ClickHouse reads it
        from the parts' min/max index); None when it holds none."""
        newest = self._client.query(f"SELECT max(created_at) FROM {self.items_table}")
        value = newest.result_rows[0][0]
        return utc(value) if value and utc(value).year > 1970 else None  # max() of none: 0

    def _fetch(
        self,
        table: str,
        columns: str,
        where: str,
        params: dict[str, Any],
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None = None,
        upper: datetime | None = None,
    ) -> list[tuple[Any, ...]]:
        where = keyset(where, params, after, lower, upper)
        params["limit"] = limit
        return [
            tuple(r)
            for r in self._client.query(
                f"SELECT {columns}, is_deleted FROM {table} WHERE {where} "
                "ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
                parameters=params,
                settings=PAGE_READ,
            ).result_rows
        ]

    # -- environments ----------------------------------------------------------------------

    def environments(self, project: str) -> list[tuple[str, int]]:
        """Return each environment of the project's live records (of every kind) with their
        number, by name.

        One read of the list copy's key and environment with FINAL (copies and tombstones
        resolve as pages do): a scan of narrow columns of every record of the project.
        """
        rows = self._client.query(
            f"SELECT environment, count() FROM {self.items_table} FINAL "
            "WHERE project = {project:String} GROUP BY environment ORDER BY environment",
            parameters={"project": project},
        ).result_rows
        return [(str(r[0]), int(r[1])) for r in rows]

    # -- delete ----------------------------------------------------------------------------

    def delete_matching(self, project: str, filters: RequestFilter) -> int:
        """Tombstone every live record matching; return how many.

        The records are those of the keys the metadata index lists for one pair: FINAL then
        reads their granules only, not every granule the bloom filters let through. The
        index holds an entry for every stored record (tombstoned ones too), and a record's
        entries sit on its shard, so on a cluster each shard's subquery reads its local index.
        """
        where, params = filter_where(project, filters)
        settings: dict[str, Any] = {}
        if filters.metadata:
            key, value = self._index.driving_pair(project, filters)
            where += (
                f" AND (created_at, id) IN (SELECT created_at, id FROM {self.metadata_table} "
                "WHERE project = {project:String} AND key = {index_key:String} "
                "AND value = {index_value:String})"
            )
            params.update(index_key=key, index_value=value)
            settings["distributed_product_mode"] = "local"
        count_rows = self._client.query(
            f"SELECT count() FROM {self.table} FINAL WHERE {where}",
            parameters=params,
            settings=settings,
        ).result_rows
        count = int(count_rows[0][0])
        if count:
            # The records' scores go with them (docs/api-notes.md, "Scores and feedback"), first:
            # their ids are read from
            # the records while those still stand.
            self._client.command(
                tombstones_for_records(
                    self.scores_table, f"SELECT id FROM {self.table} FINAL WHERE {where}"
                ),
                parameters=params,
                settings={**self._insert_settings, **settings},
            )
            # The tombstones are built inside ClickHouse: no record travels through Python.
            columns = ", ".join(COLUMNS)
            replaced = ", ".join(
                "toUInt8(2) AS row_version"
                if c == "row_version"
                else "toUInt8(1) AS is_deleted"
                if c == "is_deleted"
                else c
                for c in COLUMNS
            )
            self._client.command(
                f"INSERT INTO {self.table} ({columns}) SELECT {replaced} "
                f"FROM {self.table} FINAL WHERE {where}",
                parameters=params,
                settings={**self._insert_settings, **settings},
            )
        return count


def journal_path_of(client: Client, database: str, cluster: str | None) -> Path | None:
    """Where the request log's journal of ``database`` lives: beside the embedded engine's
    files; None on a server."""
    uri = str(getattr(client, "uri", ""))
    if cluster or not uri.startswith("chdb://"):
        return None
    return Path(uri.removeprefix("chdb://")) / "request-journal" / f"{database}.journal"
