"""The request log's tables and views in ClickHouse: the log, its list copy and its indexes.

``requests`` is the log itself; ``request_items`` (what lists and details show),
``request_metadata`` (one row per metadata pair) and ``request_ids`` (where an id sits) are filled
from the same inserts by materialised views. Reads and writes are in :mod:`.requests`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .schema import Table, View

# Records are a few KiB wide: a merge reading every column of many parts at once (the
# horizontal algorithm) holds several times what merging column by column does, from one
# granule's worth of rows up, at no more CPU. By default ClickHouse only does so with 11
# columns or more to gather beside the key, which neither copy has (figures:
# docs/benchmarks.md, "Figures behind the code's choices").
_VERTICAL_MERGES = (
    "vertical_merge_algorithm_min_rows_to_activate = 8192",
    "vertical_merge_algorithm_min_columns_to_activate = 1",
)

# A merge holds buffers for every part it reads, so its memory grows with the number of parts,
# not with their size. Under full ingest parts pile up while bigger merges run, and ClickHouse
# merges up to 100 at once: more, narrower merges keep each one bounded.
_MERGE_AT_MOST = "max_parts_to_merge_at_once = 10"

# The kind of a record stored before records had one, from what the row has: a record that came
# from a span (span_id) and names no model was a framework run or an observed function; a model
# call's span named "embeddings <model>" (the openai patch) was an embedding; the rest are model
# calls (a record logged by hand without a kind is one, docs/api-notes.md, "Traces, sessions and
# users").
_KIND_OF = (
    "multiIf({model} != '' AND ({span_name} = 'embeddings' OR startsWith({span_name}, "
    "'embeddings ')), 'embedding', {model} = '' AND {span_id} != '', 'span', 'llm')"
)
KIND_OF_STORED = _KIND_OF.format(model="model", span_name="span_name", span_id="span_id")

# Every copy of the log that a list, a page or a sum filters on carries the record's
# environment beside its kind, so that the default view (every environment but the service's
# own ``promptrail-…`` ones) and ``environment=`` are tested where those reads already are.
ENVIRONMENT_COLUMN = "environment LowCardinality(String) DEFAULT 'production'"

# The log's text index (search). A part written without it (the request-log journal's inserts:
# store/writes/log_journal.py) is read whole by a search, with the same results, until the
# first merge of its rows builds it: the merge costs no more than merging indexed parts, and
# the insert saves ~8 µs of CPU a record (docs/benchmarks.md, "The search index's cost").
SEARCH_INDEX = "idx_search"

# On the embedded store, the log's tables (and the keys' last use) write a part under 64 MiB
# (every part an insert from the journal makes, and their first merges) as one file instead of
# a file or two per column and index (ClickHouse's "packed" part storage; migration 52). The
# log's inserts and merges made and removed ~3,400 files per 200,000 records, and on an ext4
# without a journal each file made scans the inodes freed in the last minutes before it takes
# one: 15-16 µs of kernel CPU a record against 7-8 packed (docs/benchmarks.md, "Packed
# parts"). A packed part is held in memory while it is written, so bigger parts (merges of
# many) keep a file per column. Not on a ClickHouse server: releases before 26.7 do not know
# the setting.
PACKED_PARTS = "min_bytes_for_full_part_storage = 67108864"

# The text search reads (lower-cased, each string value of the record's input variables, output
# and metadata, then its input, one per line: request_rows.search_text), as ClickHouse derives
# it from the stored JSON when an insert leaves it out (migration 54). The collector leaves it
# out where this gives the same text: a record without input whose three objects are flat, with
# ASCII strings only (request_rows.stored_search_text); it writes it for every other record.
# Most records are so, and the text was the second copy of their strings in each insert: built
# and encoded under the GIL, parsed again by the engine (docs/benchmarks.md, "Search text").
SEARCH_TEXT_OF_FLAT_ASCII = (
    "lower(arrayStringConcat(arrayConcat("
    "arrayMap(x -> x.2, JSONExtractKeysAndValues(input_variables, 'String')), "
    "arrayMap(x -> x.2, JSONExtractKeysAndValues(output, 'String')), "
    "mapValues(metadata_map)), '\\n'))"
)

REQUESTS = Table(
    name="requests",
    columns=(
        "project LowCardinality(String)",
        "id String",
        "created_at DateTime64(3, 'UTC')",
        "prompt_name String",
        "version UInt32",
        "model LowCardinality(String)",
        "provider LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "input_variables String",
        "input String",
        "output String",
        "metadata String",
        "metadata_map Map(LowCardinality(String), String)",
        "prompt_tokens UInt32",
        "completion_tokens UInt32",
        "total_tokens UInt32",
        "estimated_cost_usd Float64",
        "cost_known Bool",
        "latency_ms UInt32",
        "time_to_first_token_ms Nullable(UInt32)",
        "pre_process_ms UInt32",
        "llm_call_ms UInt32",
        "post_process_ms UInt32",
        "integration String",
        "error String",
        "trace_id String",
        "span_id String",
        "parent_span_id String",
        "span_name String",
        f"search_text String DEFAULT {SEARCH_TEXT_OF_FLAT_ASCII}",
        "row_version UInt8",
        "is_deleted UInt8",
        # What the record is (docs/api-notes.md, "Traces, sessions and users"). Every insert gives
        # it; the default is what
        # migration 17 fills the records stored before it with (see KIND_OF_STORED).
        f"kind LowCardinality(String) DEFAULT {KIND_OF_STORED}",
        # The usage details counted inside prompt_tokens / completion_tokens (migration 21;
        # the records stored before it read 0): prompt tokens read from and written to the
        # provider's prompt cache, completion tokens spent reasoning.
        "cached_tokens UInt32 DEFAULT 0",
        "cache_write_tokens UInt32 DEFAULT 0",
        "reasoning_tokens UInt32 DEFAULT 0",
        # The environment the record was logged in (docs/api-notes.md, Environments; migration
        # 27): the records stored before it read ``production``.
        ENVIRONMENT_COLUMN,
    ),
    indexes=(
        # (Stores made before migration 5 also had a bloom filter on id, dropped by it: ids
        # are found through REQUEST_IDS.)
        "INDEX idx_prompt prompt_name TYPE bloom_filter GRANULARITY 1",
        "INDEX idx_meta_keys mapKeys(metadata_map) TYPE bloom_filter GRANULARITY 1",
        "INDEX idx_meta_values mapValues(metadata_map) TYPE bloom_filter GRANULARITY 1",
        # Case-insensitive substring search: search_text is lower-cased at ingest. For
        # LIKE '%needle%' ClickHouse scans this inverted index's dictionary of words for
        # those containing the needle and reads only the granules their postings name.
        # The request-log journal's inserts leave it to the first merge (SEARCH_INDEX).
        f"INDEX {SEARCH_INDEX} search_text TYPE text(tokenizer = splitByNonAlpha)",
    ),
    engine="ReplacingMergeTree",
    engine_args=("row_version", "is_deleted"),
    partition_by="toYYYYMM(created_at)",
    order_by="(project, created_at, id)",
    sharded=True,
    sharding_key="cityHash64(project, id)",
    settings=(
        *_VERTICAL_MERGES,
        _MERGE_AT_MOST,
        # A merge reads a granule of every part at once, column by column, so what it holds
        # grows with the granule: 2 MiB instead of ClickHouse's 10 MiB. Fixed when the table
        # is made: stores made before migration 11 keep 10 MiB (docs/deploy.md).
        "index_granularity_bytes = 2097152",
        # An insert writing a part in the wide format (a file per column) holds two 1 MiB
        # buffers per column and index stream. Parts under 64 MiB (an insert block is at most
        # 64 MiB) go in the compact format, one file for all columns, which holds a third of
        # that. Merges into bigger parts write the wide format, where a read of a few columns
        # skips the others.
        "min_bytes_for_wide_part = 67108864",
    ),
)

# What the list item and the detail show beyond the key, packed into one JSON array each (see
# REQUEST_ITEMS), as (column, kind): the kind says how SQL writes the value and Python reads it.
_ITEM_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "number"),
    ("status", "text"),
    ("input_variables", "json"),
    ("output", "json"),
    ("metadata", "json"),
    ("total_tokens", "number"),
    ("estimated_cost_usd", "number"),
    ("latency_ms", "number"),
)
_DETAIL_FIELDS: tuple[tuple[str, str], ...] = (
    ("model", "text"),
    ("provider", "text"),
    ("input", "json"),
    ("prompt_tokens", "number"),
    ("completion_tokens", "number"),
    ("cost_known", "bool"),
    ("time_to_first_token_ms", "nullable"),
    ("pre_process_ms", "number"),
    ("llm_call_ms", "number"),
    ("post_process_ms", "number"),
    ("integration", "json"),
    ("error", "text"),
    # Since migration 21 (details written before it have 16 fields: see DETAIL_NAMES_BEFORE_21).
    ("cached_tokens", "number"),
    ("cache_write_tokens", "number"),
    ("reasoning_tokens", "number"),
    # The span fields stay last: lists read them from there (see TRACE_NAMES).
    ("trace_id", "text"),
    ("span_id", "text"),
    ("parent_span_id", "text"),
    ("span_name", "text"),
)


ITEM_NAMES = [name for name, _ in _ITEM_FIELDS]
DETAIL_NAMES = [name for name, _ in _DETAIL_FIELDS]
# The usage details migration 21 added to ``detail`` (before the span fields): a detail
# written before it lacks them, and reads as 0 of each.
TOKEN_DETAIL_NAMES = ("cached_tokens", "cache_write_tokens", "reasoning_tokens")
_DETAIL_FIELDS_BEFORE_21 = tuple(f for f in _DETAIL_FIELDS if f[0] not in TOKEN_DETAIL_NAMES)
DETAIL_NAMES_BEFORE_21 = [name for name, _ in _DETAIL_FIELDS_BEFORE_21]

# The span fields a list item shows too, packed into ``trace`` (see REQUEST_ITEMS): the last
# four of the detail's (trace_id, span_id, parent_span_id, span_name).
TRACE_NAMES = DETAIL_NAMES[-4:]


def _pack(fields: Sequence[tuple[str, str]]) -> str:
    """Return the SQL that writes ``fields`` of a ``requests`` row as one JSON array.

    The JSON columns already hold JSON text (empty for none) and go in as they are; strings
    are escaped by ClickHouse; numbers are written in their shortest exact form.
    """
    parts = []
    for name, kind in fields:
        if kind == "json":
            parts.append(f"if({name} = '', 'null', {name})")
        elif kind == "text":
            parts.append(f"toJSONString(toString({name}))")
        elif kind == "bool":
            parts.append(f"if({name}, 'true', 'false')")
        elif kind == "nullable":
            parts.append(f"ifNull(toString({name}), 'null')")
        else:
            parts.append(f"toString({name})")
    return "concat('[', " + ", ',', ".join(parts) + ", ']')"


# The trace a record belongs to, as its own column (a list filtered by trace tests it, through
# a bloom filter), and the span fields packed as a JSON array (empty for a record outside any
# trace, most of them: such a value costs next to nothing to store and read). Since migration
# 51 the view writing ``request_items`` gives ``trace`` and ``cost_known`` from the record's
# own columns (_TRACE_OF_RECORD), where ClickHouse had computed them from ``detail`` as each
# row was written, a parse of the whole packed detail for two small values (~1-2 µs of CPU a
# record: docs/benchmarks.md, "The list copy's trace from the record"). The expressions below
# stay their columns' DEFAULT: a part written before migration 12 (or 14) filled them, read
# from the detail until its MATERIALIZE COLUMN has rewritten it, and the list copy's views of
# migrations 17 to 50 give neither (an upgrade passes through them). The span fields are the
# last of ``detail``: one parse of it slices them out as they are written (``trace_id`` then
# reads the small ``trace``).
_SPAN_FIELDS = (
    f"arrayStringConcat(arraySlice(JSONExtractArrayRaw(detail), -{len(TRACE_NAMES)}), ',')"
)
_TRACE = f"if(startsWith({_SPAN_FIELDS}, '\"\",'), '', concat('[', {_SPAN_FIELDS}, ']'))"

# Whether the record's model had a price, for list items (a cost of 0 may be a known price or
# none): one Bool read beside ``item``, so a list still leaves ``detail`` unread.
_COST_KNOWN = f"JSONExtractBool(detail, {DETAIL_NAMES.index('cost_known') + 1})"

# ``trace`` as the view writes it from the record's span fields: the bytes _TRACE gave. The
# detail writes a string with toJSONString, which escapes ``/`` as ``\/``; _TRACE's
# JSONExtractArrayRaw wrote it back plain (the only difference: tested with quotes,
# backslashes, control and non-ASCII characters), and so does this.
_TRACE_OF_RECORD = (
    "if(trace_id = '', '', concat('[', "
    + ", ',', ".join(
        f"replaceAll(toJSONString(toString({name})), '\\\\/', '/')" for name in TRACE_NAMES
    )
    + ", ']'))"
)


# The records as lists and details read them, in granules of 128 rows instead of ~1,000.
# ClickHouse reads whole granules, and a granule of ``requests`` holds 2 MiB, ~1,000 records
# (10 MiB in stores made before migration 11; the byte cap counts the search text too): a
# page of a user's records spread over a month, or one detail, decompressed megabytes of
# outputs per record shown; granules of 128 rows cost a record shown a small part of that.
# Every column a keyed read touches has its own cost per granule (a
# seek, a compressed block, marks), so what a list item shows is one packed JSON array
# (``item``) and what the detail adds another (``detail``): a page reads 6 columns, not 16.
# The filter columns stay plain. ``requests`` keeps what scans over many records need: search
# and its text index, exports, deletes, the analytics read from the log. Filled by a view from
# the same inserts, so retried copies and tombstones arrive here too and resolve as there.
REQUEST_ITEMS = Table(
    name="request_items",
    columns=(
        "project LowCardinality(String)",
        "created_at DateTime64(3, 'UTC')",
        "id String",
        "prompt_name String",
        "model LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "metadata_map Map(LowCardinality(String), String)",
        "item String",
        "detail String",
        # Written by the view from the record's since migration 51 (see _TRACE_OF_RECORD).
        f"trace String DEFAULT {_TRACE}",
        "trace_id String MATERIALIZED JSONExtractString(trace, 1)",
        f"cost_known Bool DEFAULT {_COST_KNOWN}",
        "row_version UInt8",
        "is_deleted UInt8",
        # Written by the view from the record's (migration 27).
        ENVIRONMENT_COLUMN,
        # Written by the view from the record's; the default fills the rows stored before
        # migration 17 as ``requests``' does, from the detail's span fields.
        "kind LowCardinality(String) DEFAULT "
        + _KIND_OF.format(
            model="model",
            # Counted from the end: the span fields are last in every layout of ``detail``.
            span_name=f"JSONExtractString(detail, {TRACE_NAMES.index('span_name') - 4})",
            span_id=f"JSONExtractString(detail, {TRACE_NAMES.index('span_id') - 4})",
        ),
    ),
    # List by prompt reads newest first and stops at a page: a common prompt needs no index,
    # but a rare one would scan every record; one filter per 8,192 rows spares that scan at a
    # small cost to a common one.
    # A trace's records are few and anywhere in time: one filter per 1,024 rows lets a list by
    # trace skip nearly every granule.
    indexes=(
        "INDEX idx_prompt prompt_name TYPE bloom_filter GRANULARITY 64",
        "INDEX idx_trace trace_id TYPE bloom_filter GRANULARITY 8",
    ),
    engine=REQUESTS.engine,
    engine_args=REQUESTS.engine_args,
    partition_by=REQUESTS.partition_by,
    order_by=REQUESTS.order_by,
    sharded=True,
    sharding_key=REQUESTS.sharding_key,
    settings=("index_granularity = 128", *_VERTICAL_MERGES, _MERGE_AT_MOST),
)


def _items_view(
    detail_fields: Sequence[tuple[str, str]], environment: bool = True, traced: bool = True
) -> View:
    # In the order of the list copy's inserted columns (a backfill inserts the select's
    # columns by position): ``trace`` and ``cost_known`` after the detail, the environment
    # before the kind.
    return View(
        name="request_items_mv",
        to_table="request_items",
        select=(
            "SELECT project, created_at, id, prompt_name, model, status, metadata_map, "
            f"{_pack(_ITEM_FIELDS)} AS item, {_pack(detail_fields)} AS detail, "
            + (f"{_TRACE_OF_RECORD} AS trace, cost_known, " if traced else "")
            + "row_version, is_deleted, "
            + ("environment, " if environment else "")
            + "kind FROM {db}.requests{local}"
        ),
        sharded=True,
    )


REQUEST_ITEMS_MV = _items_view(_DETAIL_FIELDS)
# The view as migration 17 left it: a store upgraded from before 17 has no token columns
# until migration 21 adds them and gives the view its current query.
REQUEST_ITEMS_MV_BEFORE_21 = _items_view(_DETAIL_FIELDS_BEFORE_21, environment=False, traced=False)
# As migration 21 left it: the list copy of a store from before migration 27 has no
# environment until that migration adds it.
REQUEST_ITEMS_MV_BEFORE_27 = _items_view(_DETAIL_FIELDS, environment=False, traced=False)
# As migration 27 left it: ``trace`` and ``cost_known`` are computed by the list copy (which
# takes no value for them while they are MATERIALIZED) until migration 51.
REQUEST_ITEMS_MV_BEFORE_51 = _items_view(_DETAIL_FIELDS, traced=False)
# The list copy as migrations 12 and 14 made it (for the benchmark's comparison).
REQUEST_ITEMS_BEFORE_51 = replace(
    REQUEST_ITEMS,
    columns=tuple(
        f"trace String MATERIALIZED {_TRACE}"
        if c.startswith("trace ")
        else f"cost_known Bool MATERIALIZED {_COST_KNOWN}"
        if c.startswith("cost_known ")
        else c
        for c in REQUEST_ITEMS.columns
    ),
)

# The metadata index: one row per (record, metadata pair), in the order a metadata filter reads
# it, so that a filter reads one user's (or session's...) entries newest first instead of
# testing the bloom filters of every granule of ``requests``. The columns the other list
# filters test are copied in, so that a page reads from ``requests`` only records it shows.
# Retried copies and tombstones of a record arrive here too (the view sees every insert into
# ``requests``) and collapse as they do there; until then reads resolve them as pages do.
REQUEST_METADATA = Table(
    name="request_metadata",
    columns=(
        "project LowCardinality(String)",
        "key LowCardinality(String)",
        "value String",
        "created_at DateTime64(3, 'UTC')",
        "id String",
        "prompt_name String",
        "model LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "row_version UInt8",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("row_version", "is_deleted"),
    partition_by="toYYYYMM(created_at)",
    order_by="(project, key, value, created_at, id)",
    sharded=True,
    # As ``requests``: a record's entries live on the record's shard.
    sharding_key="cityHash64(project, id)",
    settings=(*_VERTICAL_MERGES, _MERGE_AT_MOST),
)


# Fills the index in the same insert as the records (ingest is unchanged). On a cluster each
# shard's view reads ``requests_local`` into ``request_metadata_local``.
REQUEST_METADATA_MV = View(
    name="request_metadata_mv",
    to_table="request_metadata",
    select=(
        "SELECT project, key, value, created_at, id, prompt_name, model, status, "
        "row_version, is_deleted FROM {db}.requests{local} "
        "ARRAY JOIN mapKeys(metadata_map) AS key, mapValues(metadata_map) AS value"
    ),
    sharded=True,
)

# The id index: where each record sits in ``requests``' sort key. A record's id alone does not
# say (client-chosen ids carry no time), and ``requests`` is sorted by time: without this,
# finding one id meant testing a bloom filter in every granule of the log. Here it is one
# primary-key lookup. Retried copies collapse on the key; tombstones
# are not tracked: the read of ``requests`` by full key resolves them.
REQUEST_IDS = Table(
    name="request_ids",
    columns=(
        "project LowCardinality(String)",
        "id String",
        "created_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    partition_by="toYYYYMM(created_at)",
    order_by="(project, id, created_at)",
    sharded=True,
    sharding_key="cityHash64(project, id)",
    # A lookup decompresses one granule per part: keep granules small.
    settings=("index_granularity = 1024",),
)

REQUEST_IDS_MV = View(
    name="request_ids_mv",
    to_table="request_ids",
    select="SELECT project, id, created_at FROM {db}.requests{local} WHERE row_version = 1",
    sharded=True,
)

COLUMNS = (
    "project",
    "id",
    "created_at",
    "prompt_name",
    "version",
    "model",
    "provider",
    "status",
    "input_variables",
    "input",
    "output",
    "metadata",
    "metadata_map",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "estimated_cost_usd",
    "cost_known",
    "latency_ms",
    "time_to_first_token_ms",
    "pre_process_ms",
    "llm_call_ms",
    "post_process_ms",
    "integration",
    "error",
    "trace_id",
    "span_id",
    "parent_span_id",
    "span_name",
    "search_text",
    "row_version",
    "is_deleted",
    "kind",
    "cached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "environment",
)

# The records of each trace, in the order a trace reads them: one row per record of a trace
# (most records of a framework or an observed function are), with what a trace's summary
# sums. A trace's summary and its pages are primary-key reads here, wherever in time its
# records lie, where the log (sorted by time) would test the trace's bloom filter in every
# granule. Filled by a view from the same inserts (copies and tombstones too: reads resolve
# them with FINAL, over one trace's rows), and for the records stored before migration 17 by
# its backfill.
TRACE_RECORDS = Table(
    name="trace_records",
    columns=(
        "project LowCardinality(String)",
        "trace_id String",
        "created_at DateTime64(3, 'UTC')",
        "id String",
        "parent_span_id String",
        "span_name String",
        "kind LowCardinality(String)",
        "status Enum8('success' = 1, 'error' = 2)",
        "total_tokens UInt32",
        "estimated_cost_usd Float64",
        "latency_ms UInt32",
        "user_id String",
        "session_id String",
        "row_version UInt8",
        "is_deleted UInt8",
        # Since migration 27, as the log's.
        ENVIRONMENT_COLUMN,
    ),
    engine="ReplacingMergeTree",
    engine_args=("row_version", "is_deleted"),
    order_by="(project, trace_id, created_at, id)",
    sharded=True,
    sharding_key=REQUESTS.sharding_key,
    settings=("index_granularity = 1024",),
)


def _trace_records_view(environment: bool) -> View:
    return View(
        name="trace_records_mv",
        to_table="trace_records",
        select=(
            "SELECT project, trace_id, created_at, id, parent_span_id, span_name, kind, status, "
            "total_tokens, estimated_cost_usd, latency_ms, metadata_map['user_id'] AS user_id, "
            "metadata_map['session_id'] AS session_id, row_version, is_deleted"
            + (", environment" if environment else "")
            + " FROM {db}.requests{local} WHERE trace_id != ''"
        ),
        sharded=True,
    )


TRACE_RECORDS_MV = _trace_records_view(environment=True)
# The view and the backfill's columns as migration 17 made them (27 adds the environment).
TRACE_RECORDS_MV_BEFORE_27 = _trace_records_view(environment=False)
TRACE_RECORDS_BEFORE_27 = replace(TRACE_RECORDS, columns=TRACE_RECORDS.columns[:-1])
