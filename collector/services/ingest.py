"""Logging records: validate one by one, give ids, keep retries idempotent, store in batches."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import PayloadTooLarge, PromptrailError
from ..models.requests import RequestRecordIn
from ..store.requests import RequestRow, RequestStore, to_insert_row
from .dates import utc_now_ms
from .insert_buffer import InsertBuffer

_RECORDS = TypeAdapter(list[RequestRecordIn])
_ACK_TIMEOUT = 60.0
# How far back a retry of an unstamped, client-identified record is recognised.
RETRY_LOOKBACK = timedelta(days=1)


def new_request_id(at: datetime) -> str:
    """Return a ``req_`` id whose first 48 bits are the record's time (ms), like UUIDv7."""
    millis = int(at.timestamp() * 1000)
    return f"req_{millis:012x}{os.urandom(10).hex()}"


def time_of_id(request_id: str) -> datetime | None:
    """Return the time a service-made id encodes, or None for other ids."""
    body = request_id.removeprefix("req_")
    if len(body) != 32 or not all(c in "0123456789abcdef" for c in body):
        return None
    try:
        return datetime.fromtimestamp(int(body[:12], 16) / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def to_row(record: RequestRecordIn, now: datetime) -> RequestRow:
    """Normalise a validated record into the stored shape."""
    created_at = record.created_at or now
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    created_at = created_at.replace(microsecond=created_at.microsecond // 1000 * 1000)
    output = record.output
    if output is None:
        output = {}
    elif isinstance(output, str):
        output = {"content": output}
    timing = record.timing
    latency = record.latency_ms
    if latency is None:
        latency = timing.total_latency_ms if timing and timing.total_latency_ms is not None else 0
    usage = record.usage
    total = usage.total_tokens
    if total is None:
        total = usage.prompt_tokens + usage.completion_tokens
    integration = record.integration
    return RequestRow(
        id=record.id or new_request_id(created_at),
        created_at=created_at,
        prompt_name=record.prompt_name,
        version=record.version or 0,
        model=record.model,
        provider=record.provider,
        status=record.status,
        input_variables=record.input_variables,
        input=record.input,
        output=output,
        metadata=record.metadata,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=total,
        estimated_cost_usd=usage.estimated_cost_usd or 0.0,
        cost_known=usage.estimated_cost_usd is not None,
        latency_ms=latency,
        time_to_first_token_ms=record.time_to_first_token_ms,
        pre_process_ms=timing.pre_process_ms if timing else 0,
        llm_call_ms=timing.llm_call_ms if timing else latency,
        post_process_ms=timing.post_process_ms if timing else 0,
        integration=integration.model_dump()
        if integration
        else {"pre_process_executed": False, "post_process_executed": False, "errors": []},
        error=record.error or "",
        trace_id=record.trace_id or "",
        span_id=record.span_id or "",
        parent_span_id=record.parent_span_id or "",
        span_name=record.span_name or "",
    )


@dataclass(frozen=True)
class BatchOutcome:
    """Accepted rows and rejected indexes of a batch."""

    rows: list[RequestRow]
    rejected: list[tuple[int, dict[str, Any]]]


def _error_body(exc: ValidationError) -> dict[str, Any]:
    errors = [
        {"field": ".".join(str(p) for p in e["loc"]) or "record", "message": e["msg"]}
        for e in exc.errors()
    ]
    first = errors[0]
    return {
        "type": "validation_error",
        "code": "VALIDATION_ERROR",
        "message": f"{first['field']}: {first['message']}",
        "details": {"field": first["field"], "errors": errors},
    }


class IngestService:
    """Turn logged records into stored rows, in group-committed inserts."""

    def __init__(self, store: RequestStore, buffered: bool, max_batch_records: int) -> None:
        self._store = store
        self._max_batch = max_batch_records
        self._buffer = InsertBuffer(self._store.insert) if buffered else None

    def close(self) -> None:
        """Flush and stop the insert buffer."""
        if self._buffer is not None:
            self._buffer.close()

    def log_one(self, project: str, record: RequestRecordIn) -> RequestRow:
        """Store one record and return it as stored."""
        rows = self._prepare(project, [record], utc_now_ms())
        self.store_rows(project, rows)
        return rows[0]

    def log_batch(self, project: str, records: Sequence[Any]) -> BatchOutcome:
        """Validate each record, store the valid ones, report the others by index."""
        if len(records) > self._max_batch:
            raise PayloadTooLarge(self._max_batch) from None
        rejected: list[tuple[int, dict[str, Any]]] = []
        try:
            valid = _RECORDS.validate_python(records)
        except ValidationError:
            valid = []
            for index, raw in enumerate(records):
                try:
                    valid.append(RequestRecordIn.model_validate(raw))
                except ValidationError as exc:
                    rejected.append((index, _error_body(exc)))
        rows = self._prepare(project, valid, utc_now_ms())
        self.store_rows(project, rows)
        return BatchOutcome(rows=rows, rejected=rejected)

    def store_rows(self, project: str, rows: Sequence[RequestRow]) -> None:
        """Insert rows and return once they are stored."""
        prepared = [to_insert_row(project, row) for row in rows]
        if not prepared:
            return
        if self._buffer is None:
            # A ClickHouse server batches for us: async inserts, acknowledged once flushed.
            self._store.insert(prepared, {"async_insert": 1, "wait_for_async_insert": 1})
            return
        started = time.monotonic()
        try:
            self._buffer.submit(prepared).result(timeout=_ACK_TIMEOUT)
        except Exception as exc:
            waited = time.monotonic() - started
            raise StoreWriteFailed(f"records not stored after {waited:.1f}s: {exc}") from exc

    def _prepare(
        self, project: str, records: Sequence[RequestRecordIn], now: datetime
    ) -> list[RequestRow]:
        """Normalise records; a retried id without created_at gets its first time back.

        A record's identity includes created_at (it leads the sort key). A client that sets
        its own id but lets the service pick the time gets, on a retry within
        RETRY_LOOKBACK, the time the first attempt was stored with.
        """
        rows = [to_row(record, now) for record in records]
        unstamped = [
            r.id for r, rec in zip(rows, records, strict=True) if rec.id and not rec.created_at
        ]
        if not unstamped:
            return rows
        known = self._store.created_at_of(project, unstamped, since=now - RETRY_LOOKBACK)
        return [replace(r, created_at=known[r.id]) if r.id in known else r for r in rows]


class StoreWriteFailed(PromptrailError):
    """The store did not take the records; the client should retry (nothing half-written)."""

    status = 503
    code = "STORE_UNAVAILABLE"
    type = "api_error"
