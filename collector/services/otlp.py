"""OTLP/HTTP trace ingest: decode an export, keep the model-call spans, store them as records.

An export (``ExportTraceServiceRequest``) arrives as protobuf or as OTLP JSON. Each span's
attributes are flattened to Python (arrays to lists, key-value lists to dicts) and the span is
mapped by the same code the SDK's exporter uses (:func:`~promptrail._genai.build_record`), so a
span means the same record whichever way it travels. Spans without GenAI, OpenInference or
promptrail attributes make no record and are not an error; a span that cannot be stored (bad
ids, a record failing validation) is counted in the answer's ``partial_success``. An export's
records are validated in one pass when all are valid (``IngestService.log_built``), one by
one otherwise.
A span that names no prompt but whose input messages match a chat version of its project is
linked to that version by the ingest's preparation, as a JSON record is
(:mod:`.prompts.matching`): the mapping keeps a span's messages as it found them (OpenAI's
``content`` or OpenTelemetry's ``parts``), and the matching reads both.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from google.protobuf import json_format  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from promptrail._genai import build_record, is_recordable, span_error

from ..errors import UnsupportedMediaType, ValidationFailed
from ..models.json_values import MAX_DEPTH, json_problem
from .ingest import IngestService

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
Encoding = Literal["application/x-protobuf", "application/json"]

# How many span problems the answer's error_message spells out.
_MAX_PROBLEMS = 10
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2})*$")
# OTLP JSON writes these bytes fields as hex; the proto3 JSON mapping expects base64.
_HEX_FIELDS = ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")


class InvalidSpan(ValueError):
    """A span that carries model-call attributes but cannot become a record."""


@dataclass(frozen=True)
class ExportOutcome:
    """What became of an export's spans."""

    accepted: int
    rejected_spans: int
    error_message: str


def encoding_of(content_type: str | None) -> Encoding:
    """Return the OTLP encoding a Content-Type names (parameters such as charset ignored)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == PROTOBUF:
        return PROTOBUF
    if media == JSON:
        return JSON
    raise UnsupportedMediaType(
        f"Content-Type must be {PROTOBUF} or {JSON}, not {content_type or 'missing'}",
        {"field": "content-type", "content_type": content_type, "supported": [PROTOBUF, JSON]},
    )


class OtlpService:
    """Store the model-call spans of OTLP trace exports as request records."""

    def __init__(self, ingest: IngestService) -> None:
        self._ingest = ingest

    def export(self, project: str, body: bytes, encoding: Encoding) -> tuple[bytes, int]:
        """Ingest one export body; return the ``ExportTraceServiceResponse`` in its encoding
        and how many records were stored."""
        outcome = self.ingest(project, decode_request(body, encoding))
        return encode_response(outcome, encoding), outcome.accepted

    def ingest(self, project: str, request: ExportTraceServiceRequest) -> ExportOutcome:
        """Store the recordable spans of a decoded export."""
        kept: list[Span] = []
        problems: list[str] = []

        def build() -> tuple[list[dict[str, Any]], list[int]]:
            records: list[dict[str, Any]] = []
            suspects: list[int] = []
            for span, environment in _spans(request):
                attributes = attributes_of(span.attributes)
                if not is_recordable(attributes):
                    continue
                try:
                    record = span_record(span, attributes)
                # InvalidSpan is a ValueError; a time far out of range fails the datetime.
                except (ValueError, OverflowError, OSError) as exc:
                    problems.append(f"{_label(span)}: {exc}")
                    continue
                if environment is not None:
                    record["environment"] = environment
                if _may_nest_too_deep(attributes):
                    suspects.append(len(records))
                records.append(record)
                kept.append(span)
            return records, suspects

        outcome = self._ingest.log_built(project, build)
        problems += [f"{_label(kept[i])}: {error['message']}" for i, error in outcome.rejected]
        return ExportOutcome(len(outcome.rows), len(problems), _summary(problems))


def decode_request(body: bytes, encoding: Encoding) -> ExportTraceServiceRequest:
    """Parse an export body; a malformed one is 400 VALIDATION_ERROR naming ``body``."""
    if encoding == PROTOBUF:
        try:
            request: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(body)
        except DecodeError as exc:
            raise ValidationFailed("body", f"Malformed protobuf body: {exc}") from None
        return request
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise ValidationFailed("body", "Malformed JSON body") from None
    if not isinstance(document, dict):
        raise ValidationFailed("body", "An OTLP JSON export is a JSON object")
    problem = json_problem(document, "body")
    if problem is not None:
        # Refused whole, as a body protobuf cannot hold (its parser fails on a lone surrogate).
        where, message = problem
        raise ValidationFailed("body", f"Malformed OTLP JSON body: {message} (at {where})")
    _hex_ids_to_base64(document)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValidationFailed("body", f"Malformed OTLP JSON body: {exc}") from None
    return request


def encode_response(outcome: ExportOutcome, encoding: Encoding) -> bytes:
    """Return the ``ExportTraceServiceResponse``; ``partial_success`` only if spans were lost."""
    response = ExportTraceServiceResponse()
    if outcome.rejected_spans:
        response.partial_success.rejected_spans = outcome.rejected_spans
        response.partial_success.error_message = outcome.error_message
    if encoding == PROTOBUF:
        encoded: bytes = response.SerializeToString()
        return encoded
    return json.dumps(json_format.MessageToDict(response)).encode()


def attributes_of(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    """Flatten OTLP key-values to Python values (empty values are left out)."""
    flat: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        # Most values are text: one accessor call instead of WhichOneof's and then the
        # value's (an unset or other kind reads as "", and so does empty text: _value sorts
        # those out).
        text = value.string_value
        if text:
            flat[pair.key] = text
            continue
        item = _value(value)
        if item is not None:
            flat[pair.key] = item
    return flat


def span_record(span: Span, attributes: dict[str, Any]) -> dict[str, Any]:
    """Return the record of an OTLP span (``attributes``: its own, flattened), by
    :func:`~promptrail._genai.build_record` as the SDK's exporter does; the exception events
    are read only when the status gives no message. Raises :class:`InvalidSpan` for ids or a
    start time no record can have.
    """
    trace_id = _id(span.trace_id, 16, "trace_id")
    span_id = _id(span.span_id, 8, "span_id")
    parent_raw = span.parent_span_id
    parent = _id(parent_raw, 8, "parent_span_id") if parent_raw else None
    start = span.start_time_unix_nano
    if not start:
        raise InvalidSpan("start_time_unix_nano is missing")
    status = span.status
    exceptions = (
        str(attributes_of(event.attributes).get("exception.message", ""))
        for event in span.events
        if event.name == "exception"
    )
    return build_record(
        span.name,
        trace_id,
        span_id,
        parent,
        start,
        max(span.end_time_unix_nano, start),
        attributes,
        status.code == Status.STATUS_CODE_ERROR,
        span_error(status.message, exceptions),
    )


def _may_nest_too_deep(attributes: dict[str, Any]) -> bool:
    """Whether a span with these attributes may make a record holding a JSON value nested
    deeper than ``MAX_DEPTH``: the one refusal of ``ingest.record_problem`` that nothing else
    on this path makes, so only such records are walked (``IngestService.log_built``).

    The other refusal, a lone surrogate, needs no walk: protobuf's parser refuses text that is
    not UTF-8, an OTLP JSON body is checked whole (:func:`decode_request`), and what the
    mapping parses out of JSON text the rows' encoder refuses, naming the field. Values taken
    as they are nest far less deep: protobuf's parser stops at 100 nested messages, two for
    each level of an array or key-value list, and the checked OTLP JSON body spends three of
    its ``MAX_DEPTH`` levels on each. A value parsed from JSON text nests at most as deep as
    the text has opening brackets (the mapping puts no part of it deeper than it sat in the
    text), and text nesting ``d`` deep is at least ``2 * d`` characters long.
    """
    for value in attributes.values():
        if (
            type(value) is str
            and len(value) > 2 * MAX_DEPTH
            and value.count("[") + value.count("{") > MAX_DEPTH
        ):
            return True
    return False


def _spans(request: ExportTraceServiceRequest) -> Iterator[tuple[Span, str | None]]:
    """Every span of the export, with its resource's environment (None: not given)."""
    for resource_spans in request.resource_spans:
        environment = environment_of(attributes_of(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield span, environment


def environment_of(resource: dict[str, Any]) -> str | None:
    """The environment a resource names (``deployment.environment.name``, the semantic
    conventions' current key, else the older ``deployment.environment``), lower-cased as
    environment names are (``Production`` is ``production``); None when it names none. A
    name that is still not one (docs/api-notes.md, Environments) is kept, for the record's
    check to refuse naming the field."""
    for key in ("deployment.environment.name", "deployment.environment"):
        value = resource.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    return None


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


def _id(raw: bytes, size: int, name: str) -> int:
    if len(raw) != size:
        raise InvalidSpan(f"{name} must be {size} bytes, not {len(raw)}")
    number = int.from_bytes(raw, "big")
    if not number:
        raise InvalidSpan(f"{name} must not be all zeros")
    return number


def _label(span: Span) -> str:
    return f"span {span.name!r} ({span.span_id.hex() or 'no span_id'})"


def _summary(problems: list[str]) -> str:
    if not problems:
        return ""
    shown = "; ".join(problems[:_MAX_PROBLEMS])
    more = len(problems) - _MAX_PROBLEMS
    suffix = f"; and {more} more" if more > 0 else ""
    return f"{len(problems)} span(s) rejected: {shown}{suffix}"


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite OTLP JSON's hex span and trace ids as the base64 that ParseDict reads.

    Only well-formed containers are walked; anything else is left for ParseDict to refuse.
    """
    for resource_spans in _dicts(document, "resourceSpans", "resource_spans"):
        for scope_spans in _dicts(resource_spans, "scopeSpans", "scope_spans"):
            for span in _dicts(scope_spans, "spans"):
                _rewrite_ids(span)
                for link in _dicts(span, "links"):
                    _rewrite_ids(link)


def _dicts(parent: dict[str, Any], *keys: str) -> Iterator[dict[str, Any]]:
    for key in keys:
        items = parent.get(key)
        if isinstance(items, list):
            yield from (item for item in items if isinstance(item, dict))


def _rewrite_ids(item: dict[str, Any]) -> None:
    for key in _HEX_FIELDS:
        value = item.get(key)
        if not isinstance(value, str):
            continue
        if not _HEX.match(value):
            raise ValidationFailed("body", f"Malformed OTLP JSON body: {key} must be hex")
        item[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
