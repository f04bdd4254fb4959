"""A batch body read in one compiled pass (msgspec), for the common case: every record valid.

``POST /v1/requests/batch`` spent most of its Python time building pydantic models of the
records (docs/benchmarks.md, "Request log"). :func:`decode_batch` reads the same body with
msgspec into structs declaring the same rules as :class:`..models.requests.RequestRecordIn`,
about four times faster. It is only ever a shortcut: whatever it does not accept (a rule it
does not state as pydantic does, a lax coercion pydantic allows, a lone surrogate escape, a
value nested deeper than the store takes) makes it answer None, and the body then takes the
pydantic path, which stores it or rejects its records by index exactly as before. So it may
refuse more than pydantic, never accept more.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from ..models.json_values import json_problem
from ..models.requests import RESERVED_ENVIRONMENT_PREFIX, RecordKind

# ``\Z``, not ``$``: Python's ``$`` also matches before a final newline, pydantic's does not.
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]
_Id = Annotated[str, msgspec.Meta(pattern=r"^req_[A-Za-z0-9_\-]{1,64}\Z")]
_TraceId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}\Z")]
_SpanId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}\Z")]
_Environment = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_-]{1,40}\Z")]
_MetadataKey = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class FastUsage(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`..models.requests.UsageIn`, as msgspec reads it."""

    prompt_tokens: _Count = 0
    completion_tokens: _Count = 0
    total_tokens: _Count | None = None
    estimated_cost_usd: Annotated[float, msgspec.Meta(ge=0)] | None = None
    cached_tokens: _Count | None = None
    reasoning_tokens: _Count | None = None
    cache_write_tokens: _Count | None = None


class FastTiming(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`..models.requests.TimingIn`, as msgspec reads it."""

    total_latency_ms: _Count | None = None
    pre_process_ms: _Count = 0
    llm_call_ms: _Count = 0
    post_process_ms: _Count = 0


class FastIntegration(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`..models.requests.IntegrationIn`, as msgspec reads it."""

    pre_process_executed: bool = False
    post_process_executed: bool = False
    errors: list[Any] = msgspec.field(default_factory=list)

    def model_dump(self) -> dict[str, Any]:
        """The stored value, as the pydantic model dumps it."""
        return {
            "pre_process_executed": self.pre_process_executed,
            "post_process_executed": self.post_process_executed,
            "errors": self.errors,
        }


class FastRecord(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`..models.requests.RequestRecordIn`, as msgspec reads it (same fields, rules
    and defaults; the reserved environments are refused by :func:`decode_batch`)."""

    id: _Id | None = None
    created_at: datetime | None = None
    prompt_name: Annotated[str, msgspec.Meta(max_length=128)] = ""
    version: Annotated[int, msgspec.Meta(ge=1, le=2**31)] | None = None
    model: Annotated[str, msgspec.Meta(max_length=200)] = ""
    provider: Annotated[str, msgspec.Meta(max_length=64)] = ""
    status: Literal["success", "error"] = "success"
    input_variables: dict[str, Any] = msgspec.field(default_factory=dict)
    input: Any = None
    output: dict[str, Any] | str | None = None
    metadata: Annotated[dict[_MetadataKey, Any], msgspec.Meta(max_length=100)] = msgspec.field(
        default_factory=dict
    )
    usage: FastUsage = msgspec.field(default_factory=FastUsage)
    latency_ms: _Count | None = None
    time_to_first_token_ms: _Count | None = None
    timing: FastTiming | None = None
    integration: FastIntegration | None = None
    error: Annotated[str, msgspec.Meta(max_length=100_000)] | None = None
    trace_id: _TraceId | None = None
    span_id: _SpanId | None = None
    parent_span_id: _SpanId | None = None
    span_name: Annotated[str, msgspec.Meta(max_length=256)] | None = None
    kind: RecordKind = "llm"
    environment: _Environment = "production"


class _Batch(msgspec.Struct):
    records: list[FastRecord]


_DECODER = msgspec.json.Decoder(_Batch)
_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)  # every value's type tested in C (request_rows._ONLY_STR)
# A time with more than 6 digits of fractions: msgspec rounds them to the microsecond where
# pydantic truncates (.9999999 would be the next second), so such a body goes to pydantic. Any
# text of that shape sends it there, which is only slower.
_LONG_FRACTION = re.compile(r":\d\d[.,]\d{7}")
_LONG_FRACTION_BYTES = re.compile(_LONG_FRACTION.pattern.encode())


def decode_batch(body: bytes) -> list[FastRecord] | None:
    """The records of a batch body whose every record is valid and storable, else None.

    None also when the body is not a batch, or is one pydantic might read differently: the
    caller then reads it as before.
    """
    if _LONG_FRACTION_BYTES.search(body):
        return None
    try:
        records = _DECODER.decode(body).records
    except (msgspec.DecodeError, RecursionError):  # not JSON, not valid as msgspec reads it,
        return None  # or nested past msgspec's limit
    for record in records:
        if record.environment.startswith(RESERVED_ENVIRONMENT_PREFIX) or not _storable(record):
            return None
    return records


def convert_records(records: list[dict[str, Any]]) -> list[FastRecord] | None:
    """Records built in process (the OTLP route's spans) as :class:`FastRecord`, or None when
    one is not valid as msgspec reads it (or names a reserved environment): the caller then
    validates them with pydantic, as before. Neither their nesting nor their text is checked
    here: the caller walks the records that may nest too deep, and its encoder refuses text
    UTF-8 cannot carry (``IngestService.log_built``)."""
    for built in records:
        created_at = built.get("created_at")
        if type(created_at) is str and _LONG_FRACTION.search(created_at):
            return None
    try:
        converted = msgspec.convert(records, list[FastRecord])
    except msgspec.ValidationError:
        return None
    for record in converted:
        if record.environment.startswith(RESERVED_ENVIRONMENT_PREFIX):
            return None
    return converted


def _storable(record: FastRecord) -> bool:
    """Whether the record's JSON values nest within what the store takes (lone surrogates
    never get here: msgspec refuses their escapes)."""
    errors = record.integration.errors if record.integration is not None else None
    for value in (record.input_variables, record.output, record.metadata, record.input, errors):
        # Most values are flat: a dict of scalars, or a scalar (nothing to walk).
        if type(value) in _SCALARS:
            continue
        if type(value) is dict and _SCALAR_TYPES.issuperset(map(type, value.values())):
            continue
        if json_problem(value, "value") is not None:
            return False
    return True
