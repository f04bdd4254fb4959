"""The index pages: lists filtered by metadata or by prompt, read through an index table.

A page of records filtered by metadata reads candidate keys from the index entries of one pair
(``request_metadata``), newest first, checks the filter's other pairs on the index too, and
reads from ``request_items`` only the records it shows. A page filtered by prompt (and no
metadata) reads its candidates the same way from the prompt index, ``request_prompts``
(migration 40, defined here): one key range per prompt, where ``request_items``, sorted by
time, held a prompt's records one in a few hundred and a page read further back the bigger
the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import (
    PAGE_READ,
    SLACK,
    RequestFilter,
    column_clauses,
    environment_clauses,
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
from .schema import Table, View

# Index entries read at a time by a metadata-filtered page. The first read takes a few pages'
# worth: a common pair's matches are spread thin, and reading ten times as many entries costs
# about twice as much. Later reads take up to 1,000 (a user's entries sit together: 1,000 cost
# about what 100 do).
_CANDIDATES_FIRST_PAGES = 4
_CANDIDATES = 1000
# How many (project, key) pairs the index remembers the density of (see MetadataIndex.page).
_SPARSE_KEYS = 4096

# The prompt index (migration 40): one row per record that names a prompt, in the order a list
# by prompt reads it, with the columns the list's other filters test (model, status, kind,
# environment; dates are in the key), so that a page reads from ``request_items`` only the
# records it shows. Filled by a view from every insert into ``requests`` (retried copies and
# tombstones too, which collapse as there and which reads resolve as pages do); narrow rows in
# granules of 1,024, as the id index: a page reads about one granule a part.
REQUEST_PROMPTS = Table(
    name="request_prompts",
    columns=(
        "project LowCardinality(String)",
        "prompt_name String",
        "created_at DateTime64(3, 'UTC')",
        "id String",
        "model LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "kind LowCardinality(String)",
        "environment LowCardinality(String)",
        "row_version UInt8",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("row_version", "is_deleted"),
    partition_by="toYYYYMM(created_at)",
    order_by="(project, prompt_name, created_at, id)",
    sharded=True,
    # As ``requests``: a record's entry lives on the record's shard.
    sharding_key="cityHash64(project, id)",
    settings=("index_granularity = 1024", "max_parts_to_merge_at_once = 10"),
)

# On a cluster each shard's view reads ``requests_local`` into ``request_prompts_local``.
REQUEST_PROMPTS_MV = View(
    name="request_prompts_mv",
    to_table="request_prompts",
    select=(
        "SELECT project, prompt_name, created_at, id, model, status, kind, environment, "
        "row_version, is_deleted FROM {db}.requests{local} WHERE prompt_name != ''"
    ),
    sharded=True,
)


def by_prompt_index(filters: RequestFilter) -> bool:
    """Whether a list page (not a search) with ``filters`` reads through the prompt index:
    a prompt and no metadata (the metadata index carries the prompt), no trace (its own
    bloom filter finds a trace's few records) and no score test (score pages bound their
    reads by time: ``RequestStore.page``)."""
    return (
        bool(filters.prompt_name and not filters.metadata and filters.trace_id is None)
        and not filters.scores
    )


@dataclass(frozen=True)
class _Driver:
    """Where a page's candidates come from: an index table, the WHERE of its entries (with
    ``{project}``), the metadata pairs left to check and the key its density is kept by."""

    table: str
    where: str
    params: dict[str, Any]
    others: list[tuple[str, str]]
    density: tuple[str, str, str]
    # Whether the index tests every filter of the page (then only a tombstone it has not
    # seen yet makes the records refuse a candidate).
    exact: bool = True


@dataclass(frozen=True)
class MetadataIndex:
    """Pages of metadata- and prompt-filtered lists read through their index tables, and
    the driving pairs of metadata filters."""

    client: Client
    metadata_table: str
    items_table: str
    prompts_table: str = ""
    # Per index, project and metadata key that drove a page: whether its newest day last held
    # fewer candidates than the page wanted. Such a key's next pages start at the week's window.
    sparse: dict[tuple[str, str, str], bool] = field(default_factory=dict, compare=False)

    def page(
        self, project: str, filters: RequestFilter, after: tuple[datetime, str] | None, limit: int
    ) -> list[RequestRow]:
        """Return a page of a metadata-filtered list through the metadata index, or of a
        prompt-filtered one (:func:`by_prompt_index`) through the prompt index.

        The keys of candidates, newest first after the position, come from the index entries
        of one pair (the rarest-looking, :meth:`driving_pair`), or of the prompt, that also
        pass the filters the index carries (prompt, model, status, dates; the prompt index
        kinds and environments too); runs of copies are resolved and
        tombstoned keys dropped as a scan of the log does, window after window until the
        page's worth is known; the filter's other pairs are checked on the index too. The
        candidates are then read from ``request_items`` by key with the rest of the filter
        (kinds, environments, scores), as many as the page still lacks, and resolved again:
        the records have the last word on copies and tombstones, so the page and its cursor
        are exactly those of a scan of the records.
        """
        # The records are tested on every filter but the metadata: the driving pair's entries
        # and the other pairs' lookups on the index vouch for that (a record's metadata never
        # changes), and reading the map column of each keyed granule cost a quarter of the
        # keyed read (~3.5 of ~15 ms p50 at 200k records).
        where, params = filter_where(project, replace(filters, metadata={}))
        driver = self._driver(project, filters)
        others = driver.others
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
        density = driver.density
        skip_day = self.sparse.get(density, False) and len(lowers) > 2
        if skip_day:
            lowers = lowers[1:]
        first_read = True
        keys: list[tuple[datetime, str]] = []  # candidates not yet checked on the other pairs
        verified: list[tuple[datetime, str]] = []  # candidates checked, not yet read
        exhausted = False  # the index has no more candidates
        while len(found) < limit:
            need = limit - len(found)
            # The records refuse a candidate only if the index missed its tombstone, or for a
            # filter the index does not carry (the metadata index: kinds, environments).
            # Each keyed read costs ~10-15 ms at 10M records however few its keys, and a
            # user's entries are a third spans (a list shows model calls): with such a
            # filter, half as many again are read at once, from the entries read already.
            take = need if driver.exact else need + need // 2 + SLACK
            # Candidates are gathered window after window until the page's worth is known,
            # then read from the records in one read: a user's page whose newest day holds
            # four records reads the records once, not once per window (each read of keyed
            # records costs ~10 ms however few the keys).
            while len(verified) < need or (keys and len(verified) < take):
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
                keys, position, complete = self._candidates(driver, position, reading, lowers[0])
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
            # The candidates are resolved already: read only as many as the page lacks (see
            # ``take``); when the records refuse some, the loop reads more.
            wanted, verified = verified[:take], verified[take:]
            found += self._read_keys(where, params, wanted)
        return found[:limit]

    def _driver(self, project: str, filters: RequestFilter) -> _Driver:
        """The index a page's candidates come from: the metadata index's entries of the
        driving pair, or (no metadata) the prompt index's entries of the prompt."""
        if filters.metadata:
            pair = self.driving_pair(project, filters)
            where, params = self._index_where(project, filters, pair)
            others = [p for p in sorted(filters.metadata.items()) if p != pair]
            exact = filters.kinds is None and filters.environments is None
            density = ("meta", project, pair[0])
            return _Driver(self.metadata_table, where, params, others, density, exact)
        # The prompt is one of the column tests; the kinds and environments are tested here
        # too, so that only a tombstone the index has not seen yet makes the records refuse one.
        clauses, params = column_clauses(filters)
        clauses.insert(0, "project = {project:String}")
        params["project"] = project
        if filters.kinds is not None:
            clauses.append("kind IN {kinds:Array(String)}")
            params["kinds"] = list(filters.kinds)
        clauses += environment_clauses(filters, params)
        # Prompts differ in density as metadata keys do: each prompt's is its own.
        density = ("prompt", project, str(filters.prompt_name))
        return _Driver(self.prompts_table, " AND ".join(clauses), params, [], density)

    def _note_density(self, density: tuple[str, str, str], sparse: bool) -> None:
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
        driver: _Driver,
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None = None,
    ) -> tuple[list[tuple[datetime, str]], tuple[datetime, str] | None, bool]:
        """Return live-looking candidate keys from the index, the position after them, and
        whether the index has no more (at or above ``lower``, if given).

        As in a scan of the log, a run of copies cut by LIMIT is left for the next read.
        """

        def read(fetch: int) -> list[tuple[Any, ...]]:
            query_params = {**driver.params, "limit": fetch}
            clause = keyset(driver.where, query_params, after, lower)
            return [
                tuple(r)
                for r in self.client.query(
                    f"SELECT id, created_at, is_deleted FROM {driver.table} "
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
