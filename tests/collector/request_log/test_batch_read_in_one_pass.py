"""A batch read by the compiled pass (msgspec) is stored exactly as pydantic reads it, and
every record pydantic refuses leaves that pass to pydantic (which reports it by index)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from promptrail.collector.models.requests import RequestRecordIn, ValidRequestBatch
from promptrail.collector.services.ingest import record_values
from promptrail.collector.services.record_decode import convert_records, decode_batch

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PYDANTIC = TypeAdapter(ValidRequestBatch)
PYDANTIC_RECORDS = TypeAdapter(list[RequestRecordIn])
BASE: dict[str, Any] = {"id": "req_one", "prompt_name": "p", "model": "gpt-4o-mini"}

ACCEPTED: list[dict[str, Any]] = [
    {},
    {"created_at": "2026-02-03T04:05:06.789Z"},
    {"created_at": "2026-02-03T04:05:06.789123+02:00"},
    {"created_at": "2026-02-03T04:05:06"},
    {"created_at": "2026-02-03T04:05:06+00:00", "version": 3},
    {"output": "plain text", "status": "error", "error": "boom"},
    {"output": None, "input": "a string input"},
    {"output": {"content": "x", "n": 1.5e-7}, "input": [{"role": "user", "content": "hé ☕"}]},
    {"input": 12, "input_variables": {"a": "b", "n": 3, "f": 0.1, "x": None, "t": True}},
    {"metadata": {"user_id": "u1", "count": 5, "obj": {"k": [1, {"z": "y"}]}}},
    {"usage": {"prompt_tokens": 10, "completion_tokens": 2, "estimated_cost_usd": 0}},
    {"usage": {"prompt_tokens": 10, "cached_tokens": 3, "cache_write_tokens": 1}},
    {"usage": {"completion_tokens": 9, "reasoning_tokens": 4, "total_tokens": 99}},
    {"timing": {"total_latency_ms": 77, "pre_process_ms": 1, "llm_call_ms": 70}},
    {"latency_ms": 5, "timing": {"post_process_ms": 3}, "time_to_first_token_ms": 2},
    {"integration": {"pre_process_executed": True, "errors": ["e1", {"k": 2}]}},
    {"trace_id": "0" * 31 + "a", "span_id": "0" * 15 + "b", "parent_span_id": "1" * 16},
    {"span_name": "chat", "kind": "tool", "environment": "staging-2", "provider": "openai"},
    {"kind": "embedding", "model": "text-embedding-3-small"},
    {"id": None, "created_at": None},
    {"input": [[[[[[[[[["deep but storable"]]]]]]]]]]},
]

REFUSED: list[dict[str, Any]] = [
    {"id": "bad id"},
    {"id": "req_x\n"},
    {"trace_id": "A" * 32},
    {"trace_id": "0" * 32 + "\n"},
    {"span_id": "0" * 15},
    {"environment": "promptrail-experiment"},
    {"environment": "Prod"},
    {"environment": "prod\n"},
    {"status": "ok"},
    {"kind": "llm-call"},
    {"version": 0},
    {"prompt_name": "p" * 129},
    {"usage": {"prompt_tokens": -1}},
    {"usage": {"prompt_tokens": 2**32}},
    {"usage": {"estimated_cost_usd": -0.5}},
    {"usage": {"unknown": 1}},
    {"timing": {"extra": 1}},
    {"integration": {"errors": "not a list"}},
    {"metadata": {"": "empty key"}},
    {"metadata": {"k" * 129: "long key"}},
    {"metadata": {f"k{i}": "v" for i in range(101)}},
    {"metadata": "not an object"},
    {"output": 5},
    {"input_variables": ["not", "an", "object"]},
    {"surprise": "an unknown field"},
    {"prompt_name": None},
    {"created_at": "yesterday"},
]


def body(*records: dict[str, Any]) -> bytes:
    return json.dumps({"records": [{**BASE, **r} for r in records]}).encode()


def pydantic_values(raw: bytes) -> list[dict[str, Any]]:
    return [record_values(r, NOW) for r in PYDANTIC.validate_json(raw).records]


def same_but_made_ids(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    """The values are equal, but for the ids the service makes (random) where none was sent."""
    for mine, pydantics in zip(ours, theirs, strict=True):
        if mine["id"] != pydantics["id"]:
            assert mine["id"].startswith("req_") and pydantics["id"].startswith("req_")
            mine, pydantics = {**mine, "id": ""}, {**pydantics, "id": ""}
        assert mine == pydantics


@pytest.mark.parametrize("fields", ACCEPTED, ids=lambda f: ",".join(f) or "defaults")
def test_a_valid_record_is_stored_as_pydantic_reads_it(fields: dict[str, Any]) -> None:
    raw = body(fields)
    records = decode_batch(raw)
    assert records is not None
    same_but_made_ids([record_values(r, NOW) for r in records], pydantic_values(raw))


@pytest.mark.parametrize("fields", REFUSED, ids=lambda f: ",".join(f))
def test_a_record_pydantic_refuses_leaves_the_compiled_pass(fields: dict[str, Any]) -> None:
    raw = body({}, fields, {})
    with pytest.raises(ValidationError):
        PYDANTIC.validate_json(raw)
    assert decode_batch(raw) is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"records": [{"output": {"t": "\\ud800"}}]}',  # a lone surrogate escape
        b'{"records": [{"input": ' + b"[" * 205 + b"]" * 205 + b"}]}",  # deeper than stored
        b'{"records": [{"input": ' + b"[" * 5000 + b"]" * 5000 + b"}]}",  # past any parser
        b'{"records": [{"latency_ms": 1.0}]}',  # lax number pydantic may coerce
        b'{"records": [{"created_at": 1764417600}]}',  # a Unix time pydantic reads
        # msgspec rounds a 7th digit, pydantic truncates it: 12:00:00.999 here
        b'{"records": [{"id": "req_a", "created_at": "2026-11-29T12:00:00.9999999Z"}]}',
        b'{"records": {}}',
        b"[1, 2]",
        b"not json",
    ],
)
def test_what_pydantic_might_read_otherwise_goes_to_pydantic(raw: bytes) -> None:
    assert decode_batch(raw) is None


def test_a_batch_is_read_whole_in_order() -> None:
    raw = body(*({"id": f"req_{n}", "latency_ms": n} for n in range(50)))
    records = decode_batch(raw)
    assert records is not None
    assert [record_values(r, NOW) for r in records] == pydantic_values(raw)


# Records built in process (the OTLP route's spans) take the same two paths.


@pytest.mark.parametrize("fields", ACCEPTED, ids=lambda f: ",".join(f) or "defaults")
def test_a_built_record_is_stored_as_pydantic_validates_it(fields: dict[str, Any]) -> None:
    built = [{**BASE, **fields}]
    records = convert_records(built)
    assert records is not None
    theirs = [record_values(r, NOW) for r in PYDANTIC_RECORDS.validate_python(built)]
    same_but_made_ids([record_values(r, NOW) for r in records], theirs)


@pytest.mark.parametrize("fields", REFUSED, ids=lambda f: ",".join(f))
def test_a_built_record_pydantic_refuses_leaves_the_compiled_pass(fields: dict[str, Any]) -> None:
    built = [dict(BASE), {**BASE, **fields}]
    with pytest.raises(ValidationError):
        PYDANTIC_RECORDS.validate_python(built)
    assert convert_records(built) is None


def test_a_built_time_finer_than_a_microsecond_goes_to_pydantic() -> None:
    built = [{**BASE, "created_at": "2026-11-29T12:00:00.9999999+00:00"}]
    assert convert_records(built) is None
    (record,) = PYDANTIC_RECORDS.validate_python(built)
    assert record_values(record, NOW)["created_at"].microsecond == 999_000
