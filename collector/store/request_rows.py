"""Request records as rows: encoded for an insert, decoded from a read.

Records are written as JSONEachRow (:func:`encode_rows`), parsed by ClickHouse itself; reads
come back as column tuples that :func:`stored_row` and :func:`item_row` turn into
:class:`RequestRow`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from pydantic_core import to_json

from .connection import utc
from .request_tables import DETAIL_NAMES, DETAIL_NAMES_BEFORE_21, ITEM_NAMES, TRACE_NAMES

# How inserts read encode_rows' JSON: objects and arrays into String columns as their JSON
# text (stated, not left to a server's defaults).
JSON_INPUT: dict[str, Any] = {
    "input_format_json_read_objects_as_strings": 1,
    "input_format_json_read_arrays_as_strings": 1,
    "input_format_skip_unknown_fields": 0,
}

READ_COLUMNS = (
    "id, created_at, prompt_name, version, model, provider, toString(status), "
    "input_variables, input, output, metadata, prompt_tokens, completion_tokens, total_tokens, "
    "estimated_cost_usd, cost_known, latency_ms, time_to_first_token_ms, pre_process_ms, "
    "llm_call_ms, post_process_ms, integration, error, trace_id, span_id, parent_span_id, "
    "span_name, kind, cached_tokens, cache_write_tokens, reasoning_tokens, environment"
)

# What a list item shows (spec 2.5), read from ``request_items``: a list leaves the rest, the
# prompt input above all (a whole conversation, often the widest value), unread. ``trace`` is
# empty for a record outside any trace; ``cost_known`` is copied out of ``detail``.
LIST_COLUMNS = "id, created_at, prompt_name, model, item, trace, cost_known, kind, environment"
DETAIL_COLUMNS = "id, created_at, prompt_name, model, item, detail, kind, environment"


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
    # llm, embedding, or a span kind (docs/api-notes.md, "Traces, sessions and users").
    kind: str = "llm"
    # Counted inside prompt_tokens (cache reads and writes) and completion_tokens (reasoning).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    # Where it was logged (docs/api-notes.md, Environments); ``promptrail-…`` is the service's.
    environment: str = "production"


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
    flat = _flat_values(values)
    if flat is not None and _ONLY_STR.issuperset(map(type, flat)):
        # Most records are flat objects of strings: join them without walking each value.
        return "\n".join(flat).lower()
    return _walked_text(values)


def stored_search_text(values: Mapping[str, Any]) -> str | None:
    """Return :func:`search_text` for an insert to carry, or None where the engine derives the
    same text from the stored JSON (``request_tables.SEARCH_TEXT_OF_FLAT_ASCII``): a record
    without input whose input variables, output and metadata are flat objects of ASCII strings.

    ASCII only, because the engine's ``lower`` changes only A-Z, where Python's lowers every
    cased letter; flat objects of strings only, because the engine reads one level of each.
    """
    flat = _flat_values(values)
    if flat is not None and _ONLY_STR.issuperset(map(type, flat)):
        return None if all(map(str.isascii, flat)) else "\n".join(flat).lower()
    return _walked_text(values)


def _flat_values(values: Mapping[str, Any]) -> list[Any] | None:
    """The values of the record's input variables, output and metadata, in that order, when it
    has no input and those three are objects (None otherwise)."""
    sources = (values["input_variables"], values["output"], values["metadata"])
    if (
        values["input"] is None
        and type(sources[0]) is dict
        and type(sources[1]) is dict
        and type(sources[2]) is dict
    ):
        return [*sources[0].values(), *sources[1].values(), *sources[2].values()]
    return None


def _walked_text(values: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for source in (values["input_variables"], values["output"], values["metadata"]):
        _collect_strings(source, parts)
    _collect_strings(values["input"], parts)
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


_ENCODER = msgspec.json.Encoder()
# Type checks of every value of a dict run as ``set.issuperset(map(type, ...))``: in C, where a
# generator under ``all`` entered a Python frame per value (~1 µs a record, four dicts each).
_ONLY_STR = frozenset((str,))


def encode_rows(project: str, rows: Iterable[Mapping[str, Any]], checked: bool = False) -> bytes:
    """Return records as one JSON array of row objects, ready for :meth:`RequestStore.insert`.

    ``rows`` are each record's stored values by :class:`RequestRow` field. The JSON objects
    (input variables, output, metadata, integration, a structured input) stay objects here:
    ClickHouse stores each one's JSON text in its String column (``JSON_INPUT``), so the
    whole batch is serialised in one pass instead of value by value: by pydantic-core, which
    writes NaN and infinities as such and raises ``PydanticSerializationError`` for a value
    UTF-8 cannot carry (a lone surrogate); or, for ``checked`` rows, which hold neither (read
    by the compiled pass, ``services/record_decode.py``), by msgspec, in a third of the time.
    """
    stored = [_stored(project, row) for row in rows]
    if checked:
        return _ENCODER.encode(stored)
    return to_json(stored, inf_nan_mode="constants")


def _stored(project: str, values: Mapping[str, Any]) -> dict[str, Any]:
    metadata = values["metadata"]
    value_in = values["input"]
    text = stored_search_text(values)
    row = {
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
        if _ONLY_STR.issuperset(map(type, metadata.values()))
        else {str(k): metadata_text(v) for k, v in metadata.items()},
        "row_version": 1,
        "is_deleted": 0,
    }
    if text is not None:
        row["search_text"] = text
    return row


_PIECE = 1 << 20


def joined_rows(arrays: Sequence[bytes]) -> Generator[bytes, None, None]:
    """Yield the rows of several encoded batches as one comma-separated stream, 1 MiB at a time.

    The client writes an insert's data to a file the engine reads, piece by piece: joining
    the batches first would hold up to 64 MiB more for every insert.
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


def stored_row(values: Sequence[Any]) -> RequestRow:
    """Build a whole row from ``requests`` (:data:`READ_COLUMNS`)."""
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
        kind=values[27],
        cached_tokens=int(values[28]),
        cache_write_tokens=int(values[29]),
        reasoning_tokens=int(values[30]),
        environment=values[31],
    )


def item_row(values: Sequence[Any], detail: bool = False) -> RequestRow:
    """Build a row from ``request_items`` (LIST_COLUMNS, or DETAIL_COLUMNS if ``detail``).

    A list's rows leave the detail's fields but the span fields and ``cost_known`` at their
    defaults.
    """
    fields: dict[str, Any] = dict(zip(ITEM_NAMES, json.loads(values[4]), strict=True))
    fields["model"] = values[3]  # a plain column of request_items: lists show it too
    if detail:
        detail_values = json.loads(values[5])
        # A detail packed before migration 21 lacks the token details: they stay 0.
        names = DETAIL_NAMES if len(detail_values) == len(DETAIL_NAMES) else DETAIL_NAMES_BEFORE_21
        fields.update(zip(names, detail_values, strict=True))
        fields["integration"] = fields["integration"] or {}
        fields["cost_known"] = bool(fields["cost_known"])
        fields["kind"] = values[6]
        fields["environment"] = values[7]
    else:
        if values[5]:
            fields.update(zip(TRACE_NAMES, json.loads(values[5]), strict=True))
        fields["cost_known"] = bool(values[6])
        fields["kind"] = values[7]
        fields["environment"] = values[8]
    for name in ("input_variables", "output", "metadata"):
        fields[name] = fields[name] or {}
    fields["estimated_cost_usd"] = float(fields["estimated_cost_usd"])
    return RequestRow(id=values[0], created_at=utc(values[1]), prompt_name=values[2], **fields)


def group_copies(rows: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """Group consecutive rows sharing (id, created_at): the copies of one record."""
    runs: list[list[tuple[Any, ...]]] = []
    for row in rows:
        if runs and runs[-1][0][0] == row[0] and runs[-1][0][1] == row[1]:
            runs[-1].append(row)
        else:
            runs.append([row])
    return runs


def whole_copies(
    rows: list[tuple[Any, ...]], limit: int
) -> tuple[list[list[tuple[Any, ...]]], bool]:
    """Group rows read newest first with LIMIT ``limit`` into runs of copies of one record.

    Return the runs and whether the read reached the end (fewer rows than the limit). Only the
    last run of a read that did not can be cut by LIMIT: it is left out, for the next read.
    """
    runs = group_copies(rows)
    complete = len(rows) < limit
    return (runs if complete else runs[:-1]), complete


def read_whole_copies(
    read: Callable[[int], list[tuple[Any, ...]]], fetch: int
) -> tuple[list[list[tuple[Any, ...]]], bool, int]:
    """Read rows with ``read(limit)`` until the read holds a whole run of copies or the end.

    Return :func:`whole_copies` of the read and the limit it took: one key can hold a whole
    fetch of copies, so the limit doubles until a run fits (callers keep it for their next read).
    """
    while True:
        runs, complete = whole_copies(read(fetch), fetch)
        if runs or complete:
            return runs, complete, fetch
        fetch *= 2  # one key holds a whole fetch of copies: read more at once
