"""The metadata index's page planner: metadata-filtered lists read through ``request_metadata``.

A page of records filtered by metadata reads candidate keys from the index entries of one pair,
newest first, checks the filter's other pairs on the index too, and reads from
``request_items`` only the records it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import (
    PAGE_READ,
    SLACK,
    RequestFilter,
    column_clauses,
    filter_where,
    keyset,
    windows,
)
from .request_rows import (
    LIST_COLUMNS,
    RequestRow,
    group_copies,
    item_row,
    read_whole_copies,
)

# Index entries read at a time by a metadata-filtered page. The first read takes a few pages'
# worth: a common pair's matches are spread thin, and reading ten times as many entries costs
# about twice as much. Later reads take up to 1,000 (a user's entries sit together: 1,000 cost
# about what 100 do).
_CANDIDATES_FIRST_PAGES = 4
_CANDIDATES = 1000
# How many (project, key) pairs the index remembers the density of (see MetadataIndex.page).
_SPARSE_KEYS = 4096


@dataclass(frozen=True)
class MetadataIndex:
    """Pages and driving pairs of metadata filters, read from the metadata index."""

    client: Client
    metadata_table: str
    items_table: str
    # Per (project, metadata key) that drove a page: whether its newest day last held fewer
    # candidates than the page wanted. Such a key's next pages start at the week's window.
    sparse: dict[tuple[str, str], bool] = field(default_factory=dict, compare=False)

    def page(
        self, project: str, filters: RequestFilter, after: tuple[datetime, str] | None, limit: int
    ) -> list[RequestRow]:
        """Return a page of a metadata-filtered list through the metadata index.

        The keys of candidates, newest first after the position, come from the index entries
        of one pair (the rarest-looking, :meth:`driving_pair`) that also pass the filters the
        index carries (prompt, model, status, dates); runs of copies are resolved and
        tombstoned keys dropped as a scan of the log does, window after window until the
        page's worth is known. The candidates are then read from ``request_items`` by key
        with the whole filter (the other pairs), as many as the page still lacks, and resolved
        again: the records have the last word, so the page and its cursor are exactly those of
        a scan of the records.
        """
        where, params = filter_where(project, filters)
        driver = self.driving_pair(project, filters)
        index_where, index_params = self._index_where(project, filters, driver)
        others = [pair for pair in sorted(filters.metadata.items()) if pair != driver]
        found: list[RequestRow] = []
        position = after
        check = limit + SLACK
        reading = min(_CANDIDATES_FIRST_PAGES * check, _CANDIDATES)
        lowers = windows(filters, after)
        # Windows only set what each pass of the index reads (the page is the same). A key
        # like user_id has a few entries a day for each value: its newest day rarely fills
        # a page, and reading it first is one index read more (~7 ms at 200k records). A key
        # like environment fills a page within the day, and a week's window reads more
        # parts. So the day is skipped for keys whose last page found their day short, and
        # a week read that reaches its limit (many a day) marks the key dense again.
        density = (project, driver[0])
        skip_day = self.sparse.get(density, False) and len(lowers) > 2
        if skip_day:
            lowers = lowers[1:]
        first_read = True
        keys: list[tuple[datetime, str]] = []  # candidates not yet checked on the other pairs
        verified: list[tuple[datetime, str]] = []  # candidates checked, not yet read
        exhausted = False  # the index has no more candidates
        while len(found) < limit:
            need = limit - len(found)
            # Candidates are gathered window after window until the page's worth is known,
            # then read from the records in one read: a user's page whose newest day holds
            # four records reads the records once, not once per window (each read of keyed
            # records costs ~10 ms however few the keys).
            while len(verified) < need:
                if keys:
                    # The other pairs are checked a batch at a time, growing when they refuse
                    # many: the next batch's lookups touch fewer index granules than all.
                    batch, keys = keys[:check], keys[check:]
                    for pair in others:
                        batch = self._keys_with(project, pair, batch)
                    verified += batch
                    if others:
                        check = min(check * 2, _CANDIDATES)
                    continue
                if exhausted:
                    break
                keys, position, complete = self._candidates(
                    index_where, index_params, position, reading, lowers[0]
                )
                reading = _CANDIDATES
                if first_read and lowers[0] is not None:
                    # Short: the day held less than a page; the week read (skipping the
                    # day) did not reach its limit, a few a day at most.
                    self._note_density(density, sparse=complete and (skip_day or len(keys) < limit))
                first_read = False
                if complete:
                    # The index's window is exhausted: go on below it, or stop at the end.
                    if lowers[0] is None:
                        exhausted = True
                    else:
                        lowers = lowers[1:]
            if not verified:
                break
            # The candidates are resolved already: read only as many as the page lacks.
            # request_items refuses one only if the index missed its tombstone, or for a
            # filter the index does not carry (kinds): then the loop reads more.
            wanted, verified = verified[:need], verified[need:]
            found += self._read_keys(where, params, wanted)
        return found[:limit]

    def _note_density(self, density: tuple[str, str], sparse: bool) -> None:
        if len(self.sparse) >= _SPARSE_KEYS and density not in self.sparse:
            self.sparse.clear()  # many keys: forget them all rather than grow
        self.sparse[density] = sparse

    def _index_where(
        self, project: str, filters: RequestFilter, pair: tuple[str, str]
    ) -> tuple[str, dict[str, Any]]:
        """Return the WHERE of the metadata index for a filter: one pair and the columns kept."""
        key, value = pair
        clauses, params = column_clauses(filters)
        clauses[:0] = ["project = {project:String}", "key = {key:String}", "value = {value:String}"]
        params.update(project=project, key=key, value=value)
        return " AND ".join(clauses), params

    def driving_pair(self, project: str, filters: RequestFilter) -> tuple[str, str]:
        """Return the metadata pair whose index entries look fewest.

        One pair needs no choice. For several, ClickHouse's estimate from the index's marks
        (``EXPLAIN ESTIMATE``: primary-key analysis only, no data read) ranks them: driving
        by ``user_id`` rather than ``environment`` reads a user's entries, not a third of all.
        """
        pairs = sorted(filters.metadata.items())
        if len(pairs) == 1:
            return pairs[0]
        estimates = []
        for key, value in pairs:
            rows = self.client.query(
                f"EXPLAIN ESTIMATE SELECT id FROM {self.metadata_table} "
                "WHERE project = {project:String} AND key = {key:String} "
                "AND value = {value:String}",
                parameters={"project": project, "key": key, "value": value},
            ).named_results()
            estimates.append((sum(int(row["rows"]) for row in rows), key, value))
        _, key, value = min(estimates)
        return key, value

    def _keys_with(
        self, project: str, pair: tuple[str, str], keys: list[tuple[datetime, str]]
    ) -> list[tuple[datetime, str]]:
        """Return those of ``keys`` (in order) that have an index entry for ``pair``.

        Another pair of the filter is checked on the narrow index, by primary key, before
        any record is read: driving by ``user_id``, ``environment=prod`` drops two thirds of
        the candidates here rather than in ``requests``. A record's metadata never changes, so
        any entry will do (copies and tombstones are the driving pair's to resolve).
        """
        if not keys:
            return keys
        rows = self.client.query(
            f"SELECT DISTINCT created_at, id FROM {self.metadata_table} "
            "WHERE project = {project:String} AND key = {key:String} AND value = {value:String} "
            # The tuple IN narrows partitions and granules by itself (ClickHouse derives the
            # created_at set from it).
            "AND (created_at, id) IN {keys:Array(Tuple(DateTime64(3, 'UTC'), String))}",
            parameters={"project": project, "key": pair[0], "value": pair[1], "keys": keys},
        ).result_rows
        present = {(utc(r[0]), str(r[1])) for r in rows}
        return [k for k in keys if k in present]

    def _candidates(
        self,
        where: str,
        params: dict[str, Any],
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None = None,
    ) -> tuple[list[tuple[datetime, str]], tuple[datetime, str] | None, bool]:
        """Return live-looking candidate keys from the index, the position after them, and
        whether the index has no more (at or above ``lower``, if given).

        As in a scan of the log, a run of copies cut by LIMIT is left for the next read.
        """

        def read(fetch: int) -> list[tuple[Any, ...]]:
            query_params = {**params, "limit": fetch}
            clause = keyset(where, query_params, after, lower)
            return [
                tuple(r)
                for r in self.client.query(
                    f"SELECT id, created_at, is_deleted FROM {self.metadata_table} "
                    f"WHERE {clause} ORDER BY created_at DESC, id DESC LIMIT {{limit:UInt32}}",
                    parameters=query_params,
                    settings=PAGE_READ,
                ).result_rows
            ]

        runs, complete, _ = read_whole_copies(read, limit)
        keys = [(utc(run[0][1]), str(run[0][0])) for run in runs if not any(r[-1] for r in run)]
        last = runs[-1][0] if runs else None
        position = (utc(last[1]), str(last[0])) if last is not None else after
        return keys, position, complete

    def _read_keys(
        self, where: str, params: dict[str, Any], keys: list[tuple[datetime, str]]
    ) -> list[RequestRow]:
        """Return the live records of ``keys`` (newest first) that match ``where``."""
        if not keys:
            return []
        # No ORDER BY: sorting the keyed rows in ClickHouse costs a few ms more than here,
        # where they are a page's worth. Copies of a record sort next to each other.
        rows = sorted(
            (
                tuple(r)
                for r in self.client.query(
                    f"SELECT {LIST_COLUMNS}, is_deleted FROM {self.items_table} WHERE {where} "
                    "AND (created_at, id) IN {keys:Array(Tuple(DateTime64(3, 'UTC'), String))}",
                    parameters={**params, "keys": keys},
                ).result_rows
            ),
            key=lambda row: (row[1], row[0]),
            reverse=True,
        )
        return [item_row(run[0]) for run in group_copies(rows) if not any(row[-1] for row in run)]
