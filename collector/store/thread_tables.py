"""The tables the trace, session and user reads have of their own: the activity rollup and
the thread items, with the views that fill them from the request log.

Apart from the reads so the migrations import only what they create.
"""

from __future__ import annotations

from dataclasses import replace

from .request_tables import (
    ENVIRONMENT_COLUMN,
    ITEM_NAMES,
    REQUEST_ITEMS,
    REQUEST_METADATA,
    REQUESTS,
)
from .schema import Table, View

# Where a list item's tokens and cost sit in its packed ``item`` (1-based JSON positions).
_TOKENS = ITEM_NAMES.index("total_tokens") + 1
_COST = ITEM_NAMES.index("estimated_cost_usd") + 1

# The rollup the session and user lists take their candidates from: per (project, session or
# user, day, kind), the latest record's time, the number of tombstones and (for a session) its
# users. Kept by a view from every insert into the log, copies and tombstones too: a retried
# copy changes no maximum, a late record raises its own day's, and a tombstone is counted (not
# subtracted), which marks that key's latest time as an upper bound only. So the rollup never
# gives a total: it orders candidates by a time that is exact or too late, and each candidate
# is then summed exactly from its live records (see ThreadReads._rolled_page).
ACTIVITY_ROLLUP = Table(
    name="activity_rollup",
    columns=(
        "project LowCardinality(String)",
        "key LowCardinality(String)",
        "value String",
        "day Date",
        "kind LowCardinality(String)",
        "last_at SimpleAggregateFunction(max, DateTime64(3, 'UTC'))",
        "tombstones SimpleAggregateFunction(sum, UInt64)",
        "user_ids SimpleAggregateFunction(groupUniqArrayArray, Array(String))",
    ),
    engine="AggregatingMergeTree",
    order_by="(project, key, day, value, kind)",
    sharded=True,
    sharding_key="cityHash64(project, value)",
)

# The view reads a record's session and user out of its metadata once, then makes a row of
# each (migration 50). Its first query (``ACTIVITY_ROLLUP_MV_BEFORE_50``) repeated the whole
# metadata map for each of the two keys and looked each key up in every copy: a tenth of an
# insert's CPU for a rollup of two short strings (docs/benchmarks.md, "Where a record's CPU
# goes"). The rows are the same.
ACTIVITY_ROLLUP_MV = View(
    name="activity_rollup_mv",
    to_table=ACTIVITY_ROLLUP.name,
    select=(
        "SELECT project, key, value, toDate(created_at) AS day, kind, "
        "max(created_at) AS last_at, toUInt64(sum(is_deleted)) AS tombstones, "
        "groupUniqArrayArrayIf([user_id], key = 'session_id' AND user_id != '') AS user_ids "
        "FROM (SELECT project, created_at, kind, is_deleted, "
        "metadata_map['session_id'] AS session_id, metadata_map['user_id'] AS user_id "
        f"FROM {{db}}.{REQUESTS.name}{{local}}) "
        "ARRAY JOIN ['session_id', 'user_id'] AS key, [session_id, user_id] AS value "
        "WHERE value != '' GROUP BY project, key, value, day, kind"
    ),
    sharded=True,
)
ACTIVITY_ROLLUP_MV_BEFORE_50 = View(
    name="activity_rollup_mv",
    to_table=ACTIVITY_ROLLUP.name,
    select=(
        "SELECT project, key, metadata_map[key] AS value, toDate(created_at) AS day, kind, "
        "max(created_at) AS last_at, toUInt64(sum(is_deleted)) AS tombstones, "
        "groupUniqArrayArrayIf([metadata_map['user_id']], "
        "key = 'session_id' AND metadata_map['user_id'] != '') AS user_ids "
        f"FROM {{db}}.{REQUESTS.name}{{local}} "
        "ARRAY JOIN ['session_id', 'user_id'] AS key "
        "WHERE metadata_map[key] != '' GROUP BY project, key, value, day, kind"
    ),
    sharded=True,
)


# The records of each trace, session and user, in the order their pages and sums read them:
# one row per (record, key) for the record's trace (key 'trace_id'), its session ('session_id')
# and its user ('user_id'). A trace's row carries what a list item shows; a session's (since
# migration 39: see _LISTED) and a user's only what their sums read. A page of a trace is one
# primary-key range read here, a session's that and one lookup of its page's list items,
# where it was keys from an index and then those keys looked up in ``request_items`` (sorted
# by time, so each key a seek of its own); a session's or a user's sums over a period
# are one range read each, where a user's were its keys from the metadata index looked up in
# ``request_items``, granules all over the month. One table for the three keys, so an insert
# writes one part more, not three. Filled by a view over ``request_items`` (the list copy the
# log's view writes: its packed ``item`` is reused, not packed again; tokens and cost read
# from it once a record), copies and tombstones too (reads resolve them as pages do), and for
# the records stored before migration 23 by its backfill. Granules of 128 rows, as
# ``request_items``: a page of 100 decompresses one or two granules of each part holding it.
THREAD_ITEMS = Table(
    name="thread_items",
    columns=(
        # The metadata index's key and the filter columns it copies (its versions come last).
        *(
            c
            for c in REQUEST_METADATA.columns
            if c.split(" ", 1)[0] not in ("row_version", "is_deleted")
        ),
        "item String",
        "trace String",
        "cost_known Bool",
        "kind LowCardinality(String)",
        "trace_id String",
        "session_id String",
        "user_id String",
        "total_tokens UInt32",
        "estimated_cost_usd Float64",
        "row_version UInt8",
        "is_deleted UInt8",
        # Since migration 27, written by the view from the list copy's.
        ENVIRONMENT_COLUMN,
    ),
    engine=REQUEST_ITEMS.engine,
    engine_args=REQUEST_ITEMS.engine_args,
    partition_by=REQUEST_ITEMS.partition_by,
    order_by="(project, key, value, created_at, id)",
    sharded=True,
    # As the log: a record's rows live on the record's shard.
    sharding_key=REQUEST_ITEMS.sharding_key,
    settings=REQUEST_ITEMS.settings,
)


# Which rows carry the list columns (``prompt_name``, ``model``, ``item``, ``trace``): a
# trace's alone. A session's row leaves them empty and its page takes them from the trace's row
# of the same record, or from the list copy for a record in no trace (one primary-key lookup
# per page, ``ThreadReads._listed``): the list item, most of a row's bytes, was copied once
# more for every record with a session, twice for one also in a trace (39% of the store's
# bytes, docs/scale.md), and copying it cost the view about half its CPU per record
# (docs/benchmarks.md, "Request log"). A user's rows never carried them. Before migration 39
# a session's row did (``_LISTED_BEFORE_39``); the reads take either.
_LISTED = "key = 'trace_id'"
_LISTED_BEFORE_39 = "key != 'user_id'"


def _threads_view(environment: bool, listed: str = _LISTED) -> View:
    # The environment comes last, as in THREAD_ITEMS (a backfill inserts by position).
    env = ", environment" if environment else ""
    return View(
        name="thread_items_mv",
        to_table=THREAD_ITEMS.name,
        select=(
            "SELECT project, key, value, created_at, id, "
            f"if({listed}, prompt_name, '') AS prompt_name, if({listed}, model, '') AS model, "
            f"status, if({listed}, item, '') AS item, if({listed}, trace, '') AS trace, "
            "cost_known, kind, trace_id, session_id, user_id, total_tokens, estimated_cost_usd, "
            f"row_version, is_deleted{env} FROM ("
            f"SELECT project, created_at, id, prompt_name, model, status, item, trace, "
            "cost_known, kind, trace_id, metadata_map['session_id'] AS session_id, "
            "metadata_map['user_id'] AS user_id, "
            f"JSONExtractUInt(item, {_TOKENS}) AS total_tokens, "
            f"JSONExtractFloat(item, {_COST}) AS estimated_cost_usd, row_version, is_deleted{env} "
            f"FROM {{db}}.{REQUEST_ITEMS.name}{{local}}) "
            "ARRAY JOIN ['trace_id', 'session_id', 'user_id'] AS key, "
            "[trace_id, session_id, user_id] AS value WHERE value != ''"
        ),
        sharded=True,
    )


THREAD_ITEMS_MV = _threads_view(environment=True)
# The view as migration 27 left it (every session row with its list columns); migration 39
# gives it today's query.
THREAD_ITEMS_MV_BEFORE_39 = _threads_view(environment=True, listed=_LISTED_BEFORE_39)
# The view and the backfill's columns as migration 23 made them: the list copy it reads has no
# environment until migration 27 (which gives the view the query above).
THREAD_ITEMS_MV_BEFORE_27 = _threads_view(environment=False, listed=_LISTED_BEFORE_39)
THREAD_ITEMS_BEFORE_27 = replace(THREAD_ITEMS, columns=THREAD_ITEMS.columns[:-1])
