"""Logging records: validate, give ids, keep retries idempotent, store them through the
request log's writer (the store's write path, :mod:`..store.writes`)."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from ..errors import (
    PayloadTooLarge,
    StoreBusy,
    StoreUnavailable,
    StoreWriteFailed,
    ValidationFailed,
    plain_message,
)
from ..models.json_values import MAX_DEPTH, json_problem
from ..models.requests import RequestBatchIn, RequestRecordIn, ValidRequestBatch
from ..store.request_rows import RequestRow, encode_rows
from ..store.requests import RequestStore
from ..store.writes import Refused, RowWriter, Stored
from .dates import to_ms, utc_now_ms
from .experiment_traffic import ExperimentTraffic
from .pricing import GenaiPriceBook, PriceBook
from .prompts.matching import ChatLinks
from .record_decode import FastRecord, convert_records, decode_batch

_VALID_BATCH = TypeAdapter(ValidRequestBatch)
_VALID_RECORDS = TypeAdapter(list[RequestRecordIn])
# Records built in process, and the indexes of those record_problem must walk (log_built).
BuiltRecords = tuple[list[dict[str, Any]], list[int]]
_ENVELOPE = TypeAdapter(RequestBatchIn)
_UNENCODABLE = {"field": "record", "message": "The record cannot be written as UTF-8 JSON"}
_TOO_DEEP = {"field": "record", "message": f"JSON values may nest at most {MAX_DEPTH} levels"}
# The record fields that hold any JSON (text fields are checked by their models).
_JSON_FIELDS = ("input_variables", "input", "output", "metadata", "integration")
# A JSON string or one structural character: enough to find the records of a batch body
# without parsing it (see _split_records).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')
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


def record_values(
    record: RequestRecordIn | FastRecord, now: datetime, prices: PriceBook | None = None
) -> dict[str, Any]:
    """Normalise a validated record into its stored values, by :class:`RequestRow` field.

    ``record`` is the pydantic model or, for a batch read in the compiled pass, its msgspec
    twin (:mod:`.record_decode`): the same fields and defaults.

    A record without ``usage.estimated_cost_usd`` is priced by ``prices`` from its model,
    provider and tokens, at its own time; a cost the client sent is kept as sent.
    """
    created_at = record.created_at or now
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    created_at = to_ms(created_at)
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
    cost = usage.estimated_cost_usd
    if cost is None and prices is not None and record.model:
        cost = prices.cost(
            record.provider,
            record.model,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens or 0,
            usage.reasoning_tokens or 0,
            at=created_at,
            cache_write_tokens=usage.cache_write_tokens or 0,
        )
    return {
        "id": record.id or new_request_id(created_at),
        "created_at": created_at,
        "prompt_name": record.prompt_name,
        "version": record.version or 0,
        "model": record.model,
        "provider": record.provider,
        "status": record.status,
        "input_variables": record.input_variables,
        "input": record.input,
        "output": output,
        "metadata": record.metadata,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": total,
        "estimated_cost_usd": cost or 0.0,
        "cost_known": cost is not None,
        "latency_ms": latency,
        "time_to_first_token_ms": record.time_to_first_token_ms,
        "pre_process_ms": timing.pre_process_ms if timing else 0,
        "llm_call_ms": timing.llm_call_ms if timing else latency,
        "post_process_ms": timing.post_process_ms if timing else 0,
        "integration": integration.model_dump()
        if integration
        else {"pre_process_executed": False, "post_process_executed": False, "errors": []},
        "error": record.error or "",
        "trace_id": record.trace_id or "",
        "span_id": record.span_id or "",
        "parent_span_id": record.parent_span_id or "",
        "span_name": record.span_name or "",
        "kind": record.kind,
        "cached_tokens": usage.cached_tokens or 0,
        "cache_write_tokens": usage.cache_write_tokens or 0,
        "reasoning_tokens": usage.reasoning_tokens or 0,
        "environment": record.environment,
    }


@dataclass(frozen=True)
class BatchOutcome:
    """Ids of the stored records (in batch order) and the rejected indexes with why."""

    rows: list[str]
    rejected: list[tuple[int, dict[str, Any]]]


def rejection_of(exc: ValidationError, item: str = "record") -> dict[str, Any]:
    """The error of one rejected item of a batch (a record, a score), naming its field."""
    errors = [
        {
            "field": ".".join(str(p) for p in e["loc"]) or item,
            "message": plain_message(e["msg"]),
        }
        for e in exc.errors()
    ]
    return _rejection(errors)


def _rejection(errors: list[dict[str, str]]) -> dict[str, Any]:
    first = errors[0]
    return {
        "type": "validation_error",
        "code": "VALIDATION_ERROR",
        "message": f"{first['field']}: {first['message']}",
        "details": {"field": first["field"], "errors": errors},
    }


def refused_error(refused: Refused, retry_after: int, details: bool = False) -> StoreUnavailable:
    """The 503 a refused write answers: ``STORE_BUSY`` when the store is only slower than
    what arrives, else ``STORE_UNAVAILABLE``; with ``Retry-After`` and, asked, the writer's
    ``details``."""
    error = StoreBusy if refused.busy else StoreWriteFailed
    return error(refused.message, refused.details if details else None, retry_after)


class IngestService:
    """Turn logged records into stored rows, written by the request log's writer."""

    def __init__(
        self,
        store: RequestStore,
        records: RowWriter,
        max_batch_records: int,
        prices: PriceBook | None = None,
        retry_after_seconds: int = 2,
        experiments: ExperimentTraffic | None = None,
        links: ChatLinks | None = None,
    ) -> None:
        """Read through ``store``, write through ``records``; refusals ask the client to
        come back in ``retry_after_seconds`` (docs/deploy.md). ``experiments`` moves a
        client experiment's records to the service's own environment; ``links`` links the
        records that name no prompt to the chat version their messages match."""
        self._store = store
        self._links = links
        self._experiments = experiments
        self._records = records
        self._prices = prices or GenaiPriceBook()
        self._max_batch = max_batch_records
        self._retry_after = retry_after_seconds
        # Batches are prepared one at a time: preparing is Python work under the GIL, so more
        # at once would not go faster, and a batch in preparation holds several times its body.
        self._preparing = threading.Lock()

    def refusal(self) -> StoreUnavailable | None:
        """The 503 new records get right now, or None while ingest takes them."""
        refused = self._records.refusal()
        return None if refused is None else refused_error(refused, self._retry_after, True)

    def log_one(self, project: str, record: RequestRecordIn) -> RequestRow:
        """Store one record and return it as stored (400 naming a value it cannot store)."""
        problem = record_problem(record)
        if problem is not None:
            field, message = problem
            raise ValidationFailed(field, f"{field}: {message}")
        values = self._prepare(project, [record], utc_now_ms())
        self._store_encoded(encode_rows(project, values), len(values))
        return RequestRow(**values[0])

    def log_batch_body(self, project: str, body: bytes) -> BatchOutcome:
        """Validate and store a raw JSON batch body (``{"records": [...]}``).

        The common case, every record valid, is one pass of pydantic-core over the bytes.
        Otherwise the body is parsed as JSON and each record validated alone, so a bad record
        is reported by index and never drops the others. A body that is not a batch raises
        what reading it raised: ``ValueError`` (not JSON, or not UTF-8/16/32) or
        ``ValidationError`` (JSON, but no ``records`` list).
        """
        with self._preparing:
            prepared = self._prepare_valid_body(project, body)
        if prepared is None:
            # Read as the framework reads a JSON body (stdlib json, objects or attributes).
            try:
                document = json.loads(body)
            except RecursionError:
                return self.log_batch(project, _records_of_deep_body(body))
            envelope = _ENVELOPE.validate_python(document, from_attributes=True)
            return self.log_batch(project, envelope.records)
        encoded, ids = prepared
        self._store_encoded(encoded, len(ids))
        return BatchOutcome(rows=ids, rejected=[])

    def log_batch(self, project: str, records: Sequence[Any]) -> BatchOutcome:
        """Validate each record, store the valid ones, report the others by index."""
        self._check_size(len(records))
        rejected: list[tuple[int, dict[str, Any]]] = []
        with self._preparing:
            valid, positions = [], []
            for index, raw in enumerate(records):
                if raw is _UNREADABLE:
                    rejected.append((index, _rejection([_TOO_DEEP])))
                    continue
                try:
                    record = RequestRecordIn.model_validate(raw)
                except ValidationError as exc:
                    rejected.append((index, rejection_of(exc)))
                    continue
                problem = record_problem(record)
                if problem is None:
                    valid.append(record)
                    positions.append(index)
                else:
                    rejected.append((index, _rejection([_field_error(*problem)])))
            values = self._prepare(project, valid, utc_now_ms())
            del valid
            encoded, ids = self._encode(project, values, rejected, positions)
        self._store_encoded(encoded, len(ids))
        return BatchOutcome(rows=ids, rejected=rejected)

    def log_built(self, project: str, build: Callable[[], BuiltRecords]) -> BatchOutcome:
        """Store the records ``build`` makes in process (the OTLP route's spans), answering as
        :meth:`log_batch` does.

        ``build`` runs while no other batch is prepared, as the JSON route's parsing does: it is
        Python work under the GIL too, so more at once would not go faster. It returns the
        records and the indexes of the "suspects" among them: :func:`record_problem` walks
        only those, so ``build`` vouches that no other record holds a JSON value nested
        deeper than ``MAX_DEPTH``. A lone surrogate needs no walk: the rows' encoder refuses
        it and :meth:`_encode` refuses that record alone naming the field, as on the JSON
        route's fast path. The common case, every record valid, is one pass of pydantic-core
        over the list; otherwise :meth:`log_batch` validates each record alone and reports
        the bad ones by index.
        """
        with self._preparing:
            records, suspects = build()
            if not records:
                return BatchOutcome(rows=[], rejected=[])
            self._check_size(len(records))
            # msgspec first (a third of pydantic's time), pydantic for what it does not take.
            valid: Sequence[RequestRecordIn | FastRecord] | None = convert_records(records)
            if valid is None:
                try:
                    valid = _VALID_RECORDS.validate_python(records)
                except ValidationError:
                    valid = None
            one_pass = valid is not None
            if valid is not None:
                rejected: list[tuple[int, dict[str, Any]]] = []
                positions: list[int] | None = None
                for index in sorted(suspects):
                    problem = record_problem(valid[index])
                    if problem is not None:
                        rejected.append((index, _rejection([_field_error(*problem)])))
                if rejected:
                    refused = {index for index, _ in rejected}
                    positions = [i for i in range(len(valid)) if i not in refused]
                    valid = [valid[i] for i in positions]
                values = self._prepare(project, valid, utc_now_ms())
                del valid
                encoded, ids = self._encode(project, values, rejected, positions)
        if not one_pass:
            # Some record is invalid: validate them one by one to name each bad one.
            return self.log_batch(project, records)
        self._store_encoded(encoded, len(ids))
        return BatchOutcome(rows=ids, rejected=rejected)

    def _check_size(self, count: int) -> None:
        if count > self._max_batch:
            raise PayloadTooLarge(self._max_batch) from None

    def _prepare_valid_body(self, project: str, body: bytes) -> tuple[bytes, list[str]] | None:
        """Encode a batch body whose every record is valid (None if one is not).

        msgspec reads the body first (:func:`.record_decode.decode_batch`, ~4x faster); a
        body it does not take is read by pydantic, as before.
        """
        records: Sequence[RequestRecordIn | FastRecord] | None = decode_batch(body)
        checked = records is not None
        if records is None:
            try:
                records = _VALID_BATCH.validate_json(body).records
            except ValidationError:
                return None
        self._check_size(len(records))
        values = self._prepare(project, records, utc_now_ms())
        del records  # the models: what is stored is in values now
        if checked:  # no NaN, infinity or lone surrogate: msgspec reads none
            return encode_rows(project, values, checked=True), [row["id"] for row in values]
        return self._encode(project, values, [])

    def _encode(
        self,
        project: str,
        values: list[dict[str, Any]],
        rejected: list[tuple[int, dict[str, Any]]],
        positions: Sequence[int] | None = None,
    ) -> tuple[bytes, list[str]]:
        """Encode normalised records; return them with their ids (``rejected`` may grow).

        ``positions`` are the records' indexes in the batch (default: their order).
        """
        try:
            encoded = encode_rows(project, values)
        except PydanticSerializationError:
            # Only text JSON cannot carry (a lone surrogate read by a lenient JSON parser):
            # find those records and refuse them alone.
            indexes = range(len(values)) if positions is None else positions
            kept = []
            for index, row in zip(indexes, values, strict=True):
                try:
                    encode_rows(project, [row])
                    kept.append(row)
                except PydanticSerializationError:
                    problem = _values_problem(row)
                    error = _UNENCODABLE if problem is None else _field_error(*problem)
                    rejected.append((index, _rejection([error])))
            values, encoded = kept, encode_rows(project, kept)
            rejected.sort(key=lambda item: item[0])
        return encoded, [row["id"] for row in values]

    def _store_encoded(self, encoded: bytes, count: int) -> None:
        """Store rows encoded by encode_rows; a refusal is a 503 with ``Retry-After``."""
        match self._records.insert(encoded, count):
            case Stored():
                return
            case Refused() as refused:
                raise refused_error(refused, self._retry_after)

    def _prepare(
        self, project: str, records: Sequence[RequestRecordIn | FastRecord], now: datetime
    ) -> list[dict[str, Any]]:
        """Normalise records; a retried id without created_at gets its first time back.

        A record's identity includes created_at (it leads the sort key). A client that sets
        its own id but lets the service pick the time gets, on a retry within
        RETRY_LOOKBACK, the time the first attempt was stored with. A record of a client
        experiment (``metadata.experiment_id``) is stored under ``promptrail-experiment``. A
        record that names no prompt and whose messages match a chat version of the project
        is linked to it (docs/api-notes.md, Chat prompts).
        """
        prices = self._prices
        values = [record_values(record, now, prices) for record in records]
        if self._experiments is not None:
            self._experiments.mark(project, values)
        if self._links is not None:
            # Records that name no prompt, matched against the project's chat versions.
            self._links.link(project, values)
        unstamped = [r.id for r in records if r.id and not r.created_at]
        if unstamped:
            known = self._store.created_at_of(project, unstamped, since=now - RETRY_LOOKBACK)
            for row in values:
                first = known.get(row["id"])
                if first is not None:
                    row["created_at"] = first
        # List pages count back from the log's newest record (store/requests.py NewestHint).
        self._store.note_stored(max((row["created_at"] for row in values), default=None))
        return values


def record_problem(record: RequestRecordIn | FastRecord) -> tuple[str, str] | None:
    """Return (field, message) of a JSON value of the record that cannot be stored."""
    for field in _JSON_FIELDS:
        value = getattr(record, field)
        if field == "integration":
            value = value.errors if value is not None else None
            field = "integration.errors"
        if value is not None and not isinstance(value, int | float | bool):
            problem = json_problem(value, field)
            if problem is not None:
                return problem
    return None


def _values_problem(values: dict[str, Any]) -> tuple[str, str] | None:
    for field in (*_JSON_FIELDS, "model", "provider", "prompt_name", "error", "span_name"):
        problem = json_problem(values[field], field)
        if problem is not None:
            return problem
    return None


def _field_error(field: str, message: str) -> dict[str, str]:
    return {"field": field, "message": message}


# Stands for a record of a batch nested too deeply to be read at all.
_UNREADABLE = object()


def _records_of_deep_body(body: bytes) -> list[Any]:
    """Read the records of a batch body nested too deeply for the JSON parser, one by one.

    Each record's text is found by a scan of the body's strings and brackets (no parser
    reads past its nesting limit) and parsed alone: the records that can be read are
    validated as usual, the others become ``_UNREADABLE`` and are refused by index.
    Raises ``ValueError`` when the body is not a batch.
    """
    text = body.decode(json.detect_encoding(body))
    records: list[Any] = []
    for piece in _split_records(text):
        try:
            records.append(json.loads(piece))
        except RecursionError:
            records.append(_UNREADABLE)
    return records


def _split_records(text: str) -> list[str]:
    """Return the JSON text of each item of the top-level ``records`` array of ``text``.

    A document that is not a batch (an array, an object without a ``records`` array) raises
    the ``ValidationError`` the envelope gives a shallow document of the same shape: however
    deep it is, such a body stores nothing and must not pass for an empty batch.
    """
    depth, key, start = 0, "", -1
    top, records_value = "", ""
    pieces: list[str] = []
    for token in _JSON_TOKEN.finditer(text):
        char = token.group()[0]
        if char == '"':
            if depth == 1 and start < 0:
                key = token.group()
        elif char in "[{":
            depth += 1
            if depth == 1 and not top:
                top = char
            if depth == 2 and key == '"records"' and not records_value:
                records_value = char
                if char == "[":
                    pieces, start = [], token.end()
        elif char in "]}":
            depth -= 1
            if depth == 1 and start >= 0:
                pieces.append(text[start : token.start()])
                start = -1
        elif char == "," and depth == 2 and start >= 0:
            pieces.append(text[start : token.start()])
            start = token.end()
        elif char == "," and depth == 1:
            key = ""
    if depth != 0:
        raise ValueError("not a JSON document")
    if top != "{" or records_value != "[":
        # Only brackets nest deeply enough to get here; a shallow stand-in of the same shape
        # gets the envelope's own errors (the type of the body, or of ``records``).
        shape: Any = [] if top == "[" else {"records": {}} if records_value else {}
        _ENVELOPE.validate_python(shape, from_attributes=True)
        raise ValueError("not a batch")  # pragma: no cover - the stand-in never validates
    return [piece for piece in pieces if piece.strip()]
