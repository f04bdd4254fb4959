"""The request log on ClickHouse: one wide, append-only table.

Idempotency: a record's identity is its sort key (project, created_at, id). Retried inserts
of a record add identical rows that ReplacingMergeTree collapses at merge time; until then
pages resolve the copies themselves (see :meth:`RequestStore.page`) and aggregates use FINAL.
A delete inserts a tombstone (row_version 2, is_deleted 1) over the same key, which hides the
record at once; a late retry of the original (row_version 1) can never bring it back.

Records are written as JSONEachRow (:func:`encode_rows`), parsed by ClickHouse itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client
from pydantic_core import to_json

from .prompts import utc
from .schema import Table, View, quote

# Records are a few KiB wide: a merge reading every column of many parts at once (the
# horizontal algorithm) held ~300 MiB for 40,000 records; merging column by column from one
# granule's worth of rows up keeps it under 100 MiB, at no more CPU. By default ClickHouse
# only does so with 11 columns or more to gather beside the key, which neither copy has: a
# merge of 9 parts of the items held 86 MiB at once, 30 column by column.
_VERTICAL_MERGES = (
    "vertical_merge_algorithm_min_rows_to_activate = 8192",
    "vertical_merge_algorithm_min_columns_to_activate = 1",
)

# A merge holds buffers for every part it reads, so its memory grows with the number of parts
# (38 small parts of the log: ~260 MiB; 11: ~165 MiB), not with their size. Under full ingest
# parts pile up while bigger merges run, and ClickHouse merges up to 100 at once: more,
# narrower merges keep each one bounded.
_MERGE_AT_MOST = "max_parts_to_merge_at_once = 10"

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
        "search_text String",
        "row_version UInt8",
        "is_deleted UInt8",
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
        "INDEX idx_search search_text TYPE text(tokenizer = splitByNonAlpha)",
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
        # A merge reads a granule of every part at once, column by column: with ClickHouse's
        # 10 MiB granules (~5,000 records) a merge of 9 parts held ~140 MiB, with 2 MiB ~55.
        # Fixed when the table is made: stores made before migration 11 keep 10 MiB
        # (docs/deploy.md).
        "index_granularity_bytes = 2097152",
        # An insert writing a part in the wide format (a file per column) holds two 1 MiB
        # buffers per column and index stream: ~190 MiB to store 5,000 records. Parts under
        # 64 MiB (an insert block is at most 32 MiB) go in the compact format, one file for
        # all columns: ~60 MiB. Merges into bigger parts write the wide format, where a read
        # of a few columns skips the others.
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
    ("trace_id", "text"),
    ("span_id", "text"),
    ("parent_span_id", "text"),
    ("span_name", "text"),
)


_ITEM_NAMES = [name for name, _ in _ITEM_FIELDS]
_DETAIL_NAMES = [name for name, _ in _DETAIL_FIELDS]


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


# The records as lists and details read them, in granules of 128 rows instead of ~1,000.
# ClickHouse reads whole granules, and a granule of ``requests`` holds 2 MiB, ~1,000 records
# (10 MiB in stores made before migration 11; the byte cap counts the search text too): a
# page of a user's records spread over a month, or one detail, decompressed 2-10 MB of
# outputs per record shown (28 records ~100 ms at 10M with 10 MiB granules). Here a record
# shown costs ~140 KB. Every column a keyed read touches has its own cost per granule (a
# seek, a compressed block, marks), so what a list item shows is one packed JSON array
# (``item``) and what the detail adds another (``detail``): a page reads 5 columns, not 12.
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
        "row_version UInt8",
        "is_deleted UInt8",
    ),
    # List by prompt reads newest first and stops at a page: a common prompt needs no index,
    # but a rare one would scan every record (~700 ms at 10M); one filter per 8,192 rows
    # makes that ~10 ms and costs a common one ~2 ms.
    indexes=("INDEX idx_prompt prompt_name TYPE bloom_filter GRANULARITY 64",),
    engine=REQUESTS.engine,
    engine_args=REQUESTS.engine_args,
    partition_by=REQUESTS.partition_by,
    order_by=REQUESTS.order_by,
    sharded=True,
    sharding_key=REQUESTS.sharding_key,
    settings=("index_granularity = 128", *_VERTICAL_MERGES, _MERGE_AT_MOST),
)

REQUEST_ITEMS_MV = View(
    name="request_items_mv",
    to_table="request_items",
    select=(
        "SELECT project, created_at, id, prompt_name, model, status, metadata_map, "
        f"{_pack(_ITEM_FIELDS)} AS item, {_pack(_DETAIL_FIELDS)} AS detail, "
        "row_version, is_deleted FROM {db}.requests{local}"
    ),
    sharded=True,
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
# finding one id meant testing a bloom filter in every granule of the log (~70 ms at 10M
# records). Here it is one primary-key lookup. Retried copies collapse on the key; tombstones
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
)

# How inserts read encode_rows' JSON: objects and arrays into String columns as their JSON
# text (stated, not left to a server's defaults).
_JSON_INPUT: dict[str, Any] = {
    "input_format_json_read_objects_as_strings": 1,
    "input_format_json_read_arrays_as_strings": 1,
    "input_format_skip_unknown_fields": 0,
}

# Extra rows read per page, so that a few retried duplicates rarely need a second fetch.
_SLACK = 8

# Index entries read at a time by a metadata-filtered page. The first read takes a few pages'
# worth: at 10M records, the newest 1,000 entries of environment=prod with status=error took
# ~30 ms against ~15 for 100, as the matches are spread thin. Later reads take up to 1,000 (a
# user's entries sit together: 1,000 cost about what 100 do).
_CANDIDATES_FIRST_PAGES = 4
_CANDIDATES = 1000

# The lower bounds on created_at a list page tries in turn below its anchor (the cursor's
# time, else the filter's end, else now), then none. The log is sorted by time and partitioned
# by month, and its parts cover disjoint stretches of time: a bound lets ClickHouse skip every
# part older than it before reading, where reading newest first still sets up a stream per
# part. At 10M records (16 parts) a page of one prompt took ~35 ms over the whole log and
# ~14 ms within a day. A page the window cannot fill goes on below it, from where it stopped.
# Metadata pages read their index entries the same way (a user's: ~24 -> ~11 ms at 10M).
_WINDOWS = (timedelta(days=1), timedelta(days=8))

_READ_COLUMNS = (
    "id, created_at, prompt_name, version, model, provider, toString(status), "
    "input_variables, input, output, metadata, prompt_tokens, completion_tokens, total_tokens, "
    "estimated_cost_usd, cost_known, latency_ms, time_to_first_token_ms, pre_process_ms, "
    "llm_call_ms, post_process_ms, integration, error, trace_id, span_id, parent_span_id, "
    "span_name"
)

# What a list item shows (spec 2.5), read from ``request_items``: a list leaves the rest, the
# prompt input above all (a whole conversation, often the widest value), unread.
_LIST_COLUMNS = "id, created_at, prompt_name, model, item"
_DETAIL_COLUMNS = "id, created_at, prompt_name, model, item, detail"

# How a page is read, newest first by the sort key. Each part is a stream read backwards from
# its newest granule; with virtual rows ClickHouse starts a part only once the merge of the
# streams reaches the part's first key, so a page of the newest records reads the newest part
# or two, not a granule of every part. Lazy materialisation reads the sort key and filter
# columns first and the wide ones (output, input variables, metadata) only for the rows kept;
# its default limit (10 rows) is below a page's.
_PAGE_READ: dict[str, Any] = {
    "read_in_order_use_virtual_row": 1,
    "query_plan_max_limit_for_lazy_materialization": 1000,
}


@dataclass(frozen=True)
class RequestRow:
    """One request record as stored."""

    id: str
    created_at: datetime
    prompt_name: str = ""
    version: int = 0
    model: str = ""
    provider: str = ""
    status: str = "success"
    input_variables: dict[str, Any] = field(default_factory=dict)
    input: Any = None
    output: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated_cost_usd: float = 0.0
    cost_known: bool = False
    latency_ms: int = 0
    time_to_first_token_ms: int | None = None
    pre_process_ms: int = 0
    llm_call_ms: int = 0
    post_process_ms: int = 0
    integration: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    span_name: str = ""


@dataclass(frozen=True)
class RequestFilter:
    """Filters shared by list, export, delete and analytics."""

    prompt_name: str | None = None
    status: str | None = None
    model: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def metadata_text(value: Any) -> str:
    """Return the string a metadata value is matched by (filters compare strings)."""
    if isinstance(value, str):
        return value
    return _json(value)


def search_text(values: Mapping[str, Any]) -> str:
    """Return the lower-cased text search looks into: every string value of the record.

    ``values`` are a record's stored values by :class:`RequestRow` field.
    """
    sources = (values["input_variables"], values["output"], values["metadata"])
    if values["input"] is None and all(type(source) is dict for source in sources):
        # Most records are flat objects of strings: join them without walking each value.
        try:
            return "\n".join(
                [*sources[0].values(), *sources[1].values(), *sources[2].values()]
            ).lower()
        except TypeError:
            pass  # some value is not a string: walk them all
    parts: list[str] = []
    for source in (*sources, values["input"]):
        _collect_strings(source, parts)
    return "\n".join(parts).lower()


def _collect_strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            # Most values are plain strings: append them without a call per value.
            if type(item) is str:
                out.append(item)
            else:
                _collect_strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _collect_strings(item, out)
    elif value is not None and not isinstance(value, bool):
        out.append(str(value))


def encode_rows(project: str, rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Return records as one JSON array of row objects, ready for :meth:`RequestStore.insert`.

    ``rows`` are each record's stored values by :class:`RequestRow` field. The JSON objects
    (input variables, output, metadata, integration, a structured input) stay objects here:
    ClickHouse stores each one's JSON text in its String column (``_JSON_INPUT``), so the
    whole batch is serialised in one pass by pydantic-core instead of value by value.
    Raises ``PydanticSerializationError`` if a value cannot be written as UTF-8 JSON.
    """
    return to_json([_stored(project, row) for row in rows], inf_nan_mode="constants")


def _stored(project: str, values: Mapping[str, Any]) -> dict[str, Any]:
    metadata = values["metadata"]
    value_in = values["input"]
    return {
        **values,
        "project": project,
        "created_at": _clickhouse_time(values["created_at"]),
        # A string, number or boolean input is stored as its JSON text, as objects are.
        "input": ""
        if value_in is None
        else value_in
        if type(value_in) is dict or type(value_in) is list
        else _json(value_in),
        "metadata_map": metadata
        if all(type(v) is str for v in metadata.values())
        else {str(k): metadata_text(v) for k, v in metadata.items()},
        "search_text": search_text(values),
        "row_version": 1,
        "is_deleted": 0,
    }


_PIECE = 1 << 20


def _joined_rows(arrays: Sequence[bytes]) -> Generator[bytes, None, None]:
    """Yield the rows of several encoded batches as one comma-separated stream, 1 MiB at a time.

    The client writes an insert's data to a file the engine reads, piece by piece: joining
    the batches first would hold up to 32 MiB more for every insert.
    """
    for index, array in enumerate(arrays):
        if index:
            yield b","
        rows = memoryview(array)[1:-1]
        for start in range(0, len(rows), _PIECE):
            yield bytes(rows[start : start + _PIECE])


def _clickhouse_time(at: datetime) -> float:
    """Return a time as Unix seconds (a naive time is taken as UTC).

    A float is exact enough: its shortest repr, which is what the JSON carries, has the
    millisecond digits, and ClickHouse reads those digits as DateTime64(3) text.
    """
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def _row(values: Sequence[Any]) -> RequestRow:
    return RequestRow(
        id=values[0],
        created_at=utc(values[1]),
        prompt_name=values[2],
        version=int(values[3]),
        model=values[4],
        provider=values[5],
        status=values[6],
        input_variables=json.loads(values[7]) if values[7] else {},
        input=json.loads(values[8]) if values[8] else None,
        output=json.loads(values[9]) if values[9] else {},
        metadata=json.loads(values[10]) if values[10] else {},
        prompt_tokens=int(values[11]),
        completion_tokens=int(values[12]),
        total_tokens=int(values[13]),
        estimated_cost_usd=float(values[14]),
        cost_known=bool(values[15]),
        latency_ms=int(values[16]),
        time_to_first_token_ms=None if values[17] is None else int(values[17]),
        pre_process_ms=int(values[18]),
        llm_call_ms=int(values[19]),
        post_process_ms=int(values[20]),
        integration=json.loads(values[21]) if values[21] else {},
        error=values[22],
        trace_id=values[23],
        span_id=values[24],
        parent_span_id=values[25],
        span_name=values[26],
    )


def _item_row(values: Sequence[Any], detail: bool = False) -> RequestRow:
    """Build a row from ``request_items`` (_LIST_COLUMNS, or _DETAIL_COLUMNS if ``detail``).

    A list's rows leave the detail's fields at their defaults.
    """
    fields: dict[str, Any] = dict(zip(_ITEM_NAMES, json.loads(values[4]), strict=True))
    fields["model"] = values[3]  # a plain column of request_items: lists show it too
    if detail:
        fields.update(zip(_DETAIL_NAMES, json.loads(values[5]), strict=True))
        fields["integration"] = fields["integration"] or {}
        fields["cost_known"] = bool(fields["cost_known"])
    for name in ("input_variables", "output", "metadata"):
        fields[name] = fields[name] or {}
    fields["estimated_cost_usd"] = float(fields["estimated_cost_usd"])
    return RequestRow(id=values[0], created_at=utc(values[1]), prompt_name=values[2], **fields)


class RequestStore:
    """Every query of the request log and export tables."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self.table = f"{db}.{quote(REQUESTS.name)}"
        self.items_table = f"{db}.{quote(REQUEST_ITEMS.name)}"
        self.metadata_table = f"{db}.{quote(REQUEST_METADATA.name)}"
        self.ids_table = f"{db}.{quote(REQUEST_IDS.name)}"
        # A Distributed insert is acknowledged only once it reached the shards.
        self._insert_settings: dict[str, Any] = (
            {"distributed_foreground_insert": 1} if cluster else {}
        )

    # -- writes ----------------------------------------------------------------------------

    def insert(self, batches: Sequence[bytes], settings: dict[str, Any] | None = None) -> None:
        """Insert batches of rows, each encoded by :func:`encode_rows`, in one block."""
        arrays = [batch for batch in batches if len(batch) > 2]  # "[]" holds no row
        if not arrays:
            return
        # JSONEachRow reads one JSON array of rows, or rows separated by commas: several
        # arrays are read as their contents in a row, a lone one as it is.
        body = arrays[0] if len(arrays) == 1 else _joined_rows(arrays)
        self._client.raw_insert(
            self.table,
            COLUMNS,
            body,
            settings={**_JSON_INPUT, **self._insert_settings, **(settings or {})},
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

    # -- reads -----------------------------------------------------------------------------

    def get(self, project: str, request_id: str, at: datetime | None = None) -> RequestRow | None:
        """Return one live record.

        ``at`` is its created_at when the id tells it (service-made ids); otherwise the id
        index says where the record sits, and ``request_items`` is read on the full key.
        """
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
                f"SELECT {_DETAIL_COLUMNS}, is_deleted FROM {self.items_table} "
                f"WHERE project = {{project:String}} AND {at_clause} AND id = {{id:String}} "
                "ORDER BY created_at DESC",
                parameters=params,
                settings=settings,
            ).result_rows
        ]
        # Copies of the record (and its tombstone) share a created_at; an id a client logged
        # at two times names two records, of which the newest live one is shown.
        live = [run[0] for run in _runs(rows) if not any(row[-1] for row in run)]
        return _item_row(live[0], detail=True) if live else None

    def page(
        self,
        project: str,
        filters: RequestFilter,
        after: tuple[datetime, str] | None,
        limit: int,
        search: str | None = None,
    ) -> list[RequestRow]:
        """Return live records newest first, after a keyset position, optionally matching text.

        A metadata filter reads its candidates from the metadata index
        (:meth:`_page_by_metadata`); every other list scans ``requests`` in key order.
        A list's rows carry the fields of a list item only (the rest keep their defaults);
        a search's rows are whole.
        """
        if filters.metadata and search is None:
            return self._page_by_metadata(project, filters, after, limit)
        return self._page_scan(project, filters, after, limit, search)

    def _page_scan(
        self,
        project: str,
        filters: RequestFilter,
        after: tuple[datetime, str] | None,
        limit: int,
        search: str | None = None,
    ) -> list[RequestRow]:
        """Return a page read newest first, from ``request_items`` (``requests`` for a search).

        FINAL would hide duplicates and tombstones but stops ClickHouse from reading the sort
        key backwards and from skipping granules by index, which costs 10-100x on a big log.
        So pages are read plainly, in key order, and each run of rows sharing one key is
        resolved here: a run is one record, gone if any of its rows is a tombstone. Only the
        last run of a fetch can be cut by LIMIT, so it is left for the next fetch.
        """
        where, params = self.where(project, filters)
        table, columns = self.items_table, _LIST_COLUMNS
        build: Callable[[Sequence[Any]], RequestRow] = _item_row
        lowers = _windows(filters, after)
        if search is not None:
            where += " AND search_text LIKE {needle:String}"
            params["needle"] = "%" + _like_escape(search.lower()) + "%"
            # A hit's matched fields may be in the input: a search reads whole records.
            table, columns, build = self.table, _READ_COLUMNS, _row
            lowers = [None]  # a rare word is rarely in the newest day: one pass
        found: list[RequestRow] = []
        position = after
        fetch = limit + _SLACK
        while len(found) < limit:
            lower = lowers[0]
            rows = self._fetch(table, columns, where, dict(params), position, fetch, lower)
            runs = _runs(rows)
            complete = len(rows) < fetch
            if not complete:
                runs = runs[:-1]
                if not runs:
                    fetch *= 2  # one key holds a whole fetch of duplicates: read more at once
                    continue
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
                lowers = lowers[1:]
        return found[:limit]

    def _page_by_metadata(
        self,
        project: str,
        filters: RequestFilter,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[RequestRow]:
        """Return a page of a metadata-filtered list through the metadata index.

        The keys of candidates, newest first after the position, come from the index entries
        of one pair (the rarest-looking, :meth:`_driving_pair`) that also pass the filters the
        index carries (prompt, model, status, dates); runs of copies are resolved and
        tombstoned keys dropped as :meth:`_page_scan` does. The candidates are then read from
        ``request_items`` by key with the whole filter (the other pairs), a few more than the
        page still lacks at a time, and resolved again: the records have the last word, so the
        page and its cursor are exactly those of a scan of the records.
        """
        where, params = self.where(project, filters)
        driver = self._driving_pair(project, filters)
        index_where, index_params = self._index_where(project, filters, driver)
        others = [pair for pair in sorted(filters.metadata.items()) if pair != driver]
        found: list[RequestRow] = []
        position = after
        check = limit + _SLACK
        reading = min(_CANDIDATES_FIRST_PAGES * check, _CANDIDATES)
        lowers = _windows(filters, after)
        while len(found) < limit:
            keys, position, complete = self._candidates(
                index_where, index_params, position, reading, lowers[0]
            )
            reading = _CANDIDATES
            verified: list[tuple[datetime, str]] = []
            while len(found) < limit and (keys or verified):
                need = limit - len(found)
                while len(verified) < need and keys:
                    # The other pairs are checked a batch at a time, growing when they refuse
                    # many: the next batch's lookups touch fewer index granules than all.
                    batch, keys = keys[:check], keys[check:]
                    for pair in others:
                        batch = self._keys_with(project, pair, batch)
                    verified += batch
                    if others:
                        check = min(check * 2, _CANDIDATES)
                # The candidates are resolved already: read only as many as the page lacks.
                # request_items refuses one only if the index missed its tombstone.
                wanted, verified = verified[:need], verified[need:]
                found += self._read_keys(where, params, wanted)
            if complete:
                # The index's window is exhausted: go on below it, or stop at the end.
                if lowers[0] is None:
                    break
                lowers = lowers[1:]
        return found[:limit]

    def _index_where(
        self, project: str, filters: RequestFilter, pair: tuple[str, str]
    ) -> tuple[str, dict[str, Any]]:
        """Return the WHERE of the metadata index for a filter: one pair and the columns kept."""
        key, value = pair
        clauses, params = _column_clauses(filters)
        clauses[:0] = ["project = {project:String}", "key = {key:String}", "value = {value:String}"]
        params.update(project=project, key=key, value=value)
        return " AND ".join(clauses), params

    def _driving_pair(self, project: str, filters: RequestFilter) -> tuple[str, str]:
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
            rows = self._client.query(
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
        rows = self._client.query(
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

        As in :meth:`_page_scan`, a run of copies cut by LIMIT is left for the next read.
        """
        fetch = limit
        while True:
            query_params = {**params, "limit": fetch}
            clause = _keyset(where, query_params, after, lower)
            rows = [
                tuple(r)
                for r in self._client.query(
                    f"SELECT id, created_at, is_deleted FROM {self.metadata_table} "
                    f"WHERE {clause} ORDER BY created_at DESC, id DESC LIMIT {{limit:UInt32}}",
                    parameters=query_params,
                    settings=_PAGE_READ,
                ).result_rows
            ]
            runs = _runs(rows)
            complete = len(rows) < fetch
            if not complete:
                runs = runs[:-1]
                if not runs:
                    fetch *= 2  # one key holds a whole fetch of copies: read more at once
                    continue
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
        rows = [
            tuple(r)
            for r in self._client.query(
                f"SELECT {_LIST_COLUMNS}, is_deleted FROM {self.items_table} WHERE {where} "
                "AND (created_at, id) IN {keys:Array(Tuple(DateTime64(3, 'UTC'), String))} "
                "ORDER BY created_at DESC, id DESC",
                parameters={**params, "keys": keys},
            ).result_rows
        ]
        return [_item_row(run[0]) for run in _runs(rows) if not any(row[-1] for row in run)]

    def _fetch(
        self,
        table: str,
        columns: str,
        where: str,
        params: dict[str, Any],
        after: tuple[datetime, str] | None,
        limit: int,
        lower: datetime | None = None,
    ) -> list[tuple[Any, ...]]:
        where = _keyset(where, params, after, lower)
        params["limit"] = limit
        return [
            tuple(r)
            for r in self._client.query(
                f"SELECT {columns}, is_deleted FROM {table} WHERE {where} "
                "ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}",
                parameters=params,
                settings=_PAGE_READ,
            ).result_rows
        ]

    def where(self, project: str, filters: RequestFilter) -> tuple[str, dict[str, Any]]:
        """Return the WHERE clause and parameters of a filter (always scoped to a project)."""
        clauses, params = _column_clauses(filters)
        clauses.insert(0, "project = {project:String}")
        params["project"] = project
        for i, (key, value) in enumerate(sorted(filters.metadata.items())):
            clauses.append(f"metadata_map[{{mk{i}:String}}] = {{mv{i}:String}}")
            clauses.append(f"mapContains(metadata_map, {{mk{i}:String}})")
            params[f"mk{i}"] = key
            params[f"mv{i}"] = value
        return " AND ".join(clauses), params

    # -- delete ----------------------------------------------------------------------------

    def delete_matching(self, project: str, filters: RequestFilter) -> int:
        """Tombstone every live record matching; return how many.

        The records are those of the keys the metadata index lists for one pair: FINAL then
        reads their granules only, not every granule the bloom filters let through. The
        index holds an entry for every stored record (tombstoned ones too), and a record's
        entries sit on its shard, so on a cluster each shard's subquery reads its local index.
        """
        where, params = self.where(project, filters)
        settings: dict[str, Any] = {}
        if filters.metadata:
            key, value = self._driving_pair(project, filters)
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


def _keyset(
    where: str,
    params: dict[str, Any],
    after: tuple[datetime, str] | None,
    lower: datetime | None,
) -> str:
    """Narrow ``where`` to keys below the position ``after`` and at or above ``lower``.

    ``params`` receives the values.
    """
    if lower is not None:
        where += " AND created_at >= {lower:DateTime64(3, 'UTC')}"
        params["lower"] = lower
    if after is not None:
        where += " AND (created_at, id) < ({after_at:DateTime64(3, 'UTC')}, {after_id:String})"
        params.update(after_at=after[0], after_id=after[1])
    return where


def _windows(filters: RequestFilter, after: tuple[datetime, str] | None) -> list[datetime | None]:
    """Return the lower bounds a list page tries in turn (see _WINDOWS), ending with none."""
    anchor = after[0] if after is not None else filters.end or datetime.now(UTC)
    lowers: list[datetime | None] = [
        anchor - window
        for window in _WINDOWS
        if filters.start is None or anchor - window > filters.start
    ]
    return [*lowers, None]


def _column_clauses(filters: RequestFilter) -> tuple[list[str], dict[str, Any]]:
    """Return the clauses of a filter's column tests (prompt, status, model, dates).

    Both ``requests`` and the metadata index carry these columns under the same names.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if filters.prompt_name is not None:
        clauses.append("prompt_name = {prompt_name:String}")
        params["prompt_name"] = filters.prompt_name
    if filters.status is not None:
        clauses.append("status = {status:String}")
        params["status"] = filters.status
    if filters.model is not None:
        clauses.append("model = {model:String}")
        params["model"] = filters.model
    if filters.start is not None:
        clauses.append("created_at >= {start:DateTime64(3, 'UTC')}")
        params["start"] = filters.start
    if filters.end is not None:
        clauses.append("created_at <= {end:DateTime64(3, 'UTC')}")
        params["end"] = filters.end
    return clauses, params


def _runs(rows: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """Group consecutive rows sharing (id, created_at): the copies of one record."""
    runs: list[list[tuple[Any, ...]]] = []
    for row in rows:
        if runs and runs[-1][0][0] == row[0] and runs[-1][0][1] == row[1]:
            runs[-1].append(row)
        else:
            runs.append([row])
    return runs


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
