"""An OTLP export's records are validated in one pass; what that pass does not walk is still
refused span by span, naming the span and the field, while the export's other spans are kept.

The one pass (``IngestService.log_built``) walks a record's JSON values only when a string
attribute of its span could parse to JSON nested past ``MAX_DEPTH``; a lone surrogate is left
to the rows' encoder. These tests hold each premise of that: protobuf's parser refuses text
that is not UTF-8, it stops at a nesting limit of its own, a lone surrogate hidden in JSON text
is refused, and the depth limit holds at its exact boundary. The mapping reads JSON text
as ``json.loads`` does, by a faster way.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from promptrail._genai import _loads, record_id
from promptrail.collector.models.json_values import MAX_DEPTH
from promptrail.collector.services.otlp import attributes_of
from tests.collector.contract import assert_error

PROTOBUF = {"Content-Type": "application/x-protobuf"}
T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in nanoseconds
TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")


def nested(depth: int) -> str:
    """JSON text of ``depth`` arrays, one inside the other."""
    return "[" * depth + "]" * depth


def attribute(key: str, value: str | int | AnyValue) -> KeyValue:
    if isinstance(value, AnyValue):
        return KeyValue(key=key, value=value)
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def span(number: int, **extra: str | int | AnyValue) -> Span:
    """A GenAI chat span; ``extra`` attributes are added or replace the usual ones."""
    attributes: dict[str, str | int | AnyValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"q{number}"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"a{number}"}]),
        "promptrail.metadata": json.dumps({"user_id": f"u{number}"}),
        **extra,
    }
    return Span(
        trace_id=TRACE,
        span_id=number.to_bytes(8, "big"),
        name=f"chat {number}",
        start_time_unix_nano=T0 + number * 1_000_000,
        end_time_unix_nano=T0 + number * 1_000_000 + 5_000_000,
        attributes=[attribute(key, value) for key, value in attributes.items()],
    )


def export(*spans: Span) -> bytes:
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]
    )
    body: bytes = request.SerializeToString()
    return body


def post(api: TestClient, body: bytes) -> ExportTraceServiceResponse:
    response = api.post("/v1/traces", content=body, headers=PROTOBUF)
    assert response.status_code == 200, response.text
    parsed: ExportTraceServiceResponse = ExportTraceServiceResponse.FromString(response.content)
    return parsed


def stored(api: TestClient) -> list[str]:
    response = api.get("/v1/requests", params={"limit": 100})
    assert response.status_code == 200, response.text
    return sorted(item["id"] for item in response.json()["data"])


def ids(*numbers: int) -> list[str]:
    return sorted(record_id(int.from_bytes(TRACE, "big"), n) for n in numbers)


def test_a_clean_export_is_stored_whole_as_the_mapping_reads_it(api: TestClient) -> None:
    answer = post(api, export(*(span(n) for n in range(1, 6))))

    assert answer.partial_success.rejected_spans == 0
    assert stored(api) == ids(1, 2, 3, 4, 5)
    record = api.get(f"/v1/requests/{ids(3)[0]}").json()["data"]
    assert record["input"] == [{"role": "user", "content": "q3"}]
    assert record["output"]["content"] == "a3"
    assert record["metadata"] == {"user_id": "u3"}
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (7, 2)


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        pytest.param({"gen_ai.request.model": "m" * 300}, "model", "200", id="model-too-long"),
        pytest.param(
            {"gen_ai.input.messages": '[{"role": "user", "content": "x\\ud800"}]'},
            "input",
            "surrogate",
            id="surrogate-in-json-text",
        ),
        pytest.param(
            {"promptrail.metadata": '{"k": "\\udfff"}'}, "metadata", "surrogate", id="metadata"
        ),
        pytest.param(
            {"gen_ai.input.messages": nested(MAX_DEPTH + 1)},
            "input",
            f"{MAX_DEPTH} levels",
            id="one-level-too-deep",
        ),
        pytest.param(
            {"promptrail.metadata": '{"k": ' + nested(250) + "}"},
            "metadata",
            f"{MAX_DEPTH} levels",
            id="deep-metadata",
        ),
        pytest.param(
            {"promptrail.output": '{"k": ' + nested(MAX_DEPTH) + "}"},
            "output",
            f"{MAX_DEPTH} levels",
            id="deep-output",
        ),
    ],
)
def test_a_span_the_store_cannot_keep_is_refused_alone(
    api: TestClient, extra: dict[str, str], field: str, message: str
) -> None:
    answer = post(api, export(span(1), span(2, **extra), span(3)))

    assert answer.partial_success.rejected_spans == 1
    error = answer.partial_success.error_message
    assert "span 'chat 2' (0000000000000002)" in error, error
    assert f"{field}" in error and message in error, error
    assert stored(api) == ids(1, 3)


def test_json_text_nested_up_to_the_limit_is_stored_whole(api: TestClient) -> None:
    answer = post(api, export(span(1, **{"gen_ai.input.messages": nested(MAX_DEPTH)})))

    assert answer.partial_success.rejected_spans == 0
    value = api.get(f"/v1/requests/{ids(1)[0]}").json()["data"]["input"]
    depth = 0
    while value is not None:
        depth += 1
        value = value[0] if value else None
    assert depth == MAX_DEPTH


def test_json_text_too_deep_to_parse_is_kept_as_text(api: TestClient) -> None:
    text = nested(5_000)

    answer = post(api, export(span(1, **{"gen_ai.input.messages": text})))

    assert answer.partial_success.rejected_spans == 0
    assert api.get(f"/v1/requests/{ids(1)[0]}").json()["data"]["input"] == text


def test_protobuf_text_that_is_not_utf8_is_refused_whole(api: TestClient) -> None:
    # A lone surrogate as UTF-8 would write it (ED A0 80): no valid UTF-8 holds one.
    body = export(span(1), span(2, **{"gen_ai.request.model": "SURR"}))
    body = body.replace(b"SURR", b"\xed\xa0\x80!")

    response = api.post("/v1/traces", content=body, headers=PROTOBUF)

    assert_error(response, 400, "VALIDATION_ERROR", "body")
    assert stored(api) == []


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, as the wire writes it."""
    size, length = b"", len(payload)
    while length >= 0x80:
        size += bytes([length & 0x7F | 0x80])
        length >>= 7
    return bytes([number << 3 | 2]) + size + bytes([length]) + payload


def _export_with_deep_attribute(depth: int) -> bytes:
    """An export of one span with an attribute ``depth`` arrays deep, written by hand: the
    protobuf library itself refuses to build a message nested that deep."""
    value = _field(1, b"leaf")  # AnyValue.string_value
    for _ in range(depth):
        value = _field(5, _field(1, value))  # AnyValue.array_value -> ArrayValue.values
    pair = _field(1, b"promptrail.input") + _field(2, value)  # KeyValue
    whole_span = span(2).SerializeToString() + _field(9, pair)  # Span.attributes
    # ExportTraceServiceRequest.resource_spans -> ResourceSpans.scope_spans -> spans
    return _field(1, _field(2, _field(2, whole_span)))


def test_attribute_values_nest_only_as_deep_as_protobuf_reads(api: TestClient) -> None:
    """Values taken as they are stay far under MAX_DEPTH: deeper, protobuf refuses the body."""
    shallow = _export_with_deep_attribute(40)
    assert post(api, shallow).partial_success.rejected_spans == 0
    value: Any = api.get(f"/v1/requests/{ids(2)[0]}").json()["data"]["input"]
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0]
    assert (depth, value) == (40, "leaf")

    response = api.post(
        "/v1/traces", content=_export_with_deep_attribute(MAX_DEPTH), headers=PROTOBUF
    )

    assert_error(response, 400, "VALIDATION_ERROR", "body")
    assert stored(api) == ids(2)


def _json_loads_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def test_json_text_attributes_read_as_json_loads_reads_them() -> None:
    """The mapping's faster JSON reading (msgspec, else json's own scanner) reads every text
    as ``json.loads`` does, and keeps as text what it refuses."""
    texts = [
        *("", " ", "\ufeff[]", " [1] ", "[1] x", "[1]  \n", "\t{}", "\x0c[]", "\u00a0[]"),
        *("NaN", " -Infinity ", "1e400", "-0", "12345678901234567890123", "01", "1 2"),
        *('"\\ud800"', '"a\x01"', '{"a": 1, "a": 2}', "[1,]", "'x'", "null", nested(3_000)),
        *("1e309", "-0.0", "5e-324", "0.1", "-12345678901234567890123", '"\\u00e9\\ud83d\\ude00"'),
        *(nested(depth) for depth in (399, 400, 401, 990)),
    ]
    rng = random.Random(35)
    alphabet = '[]{}",:0123456789.-eE tnrufalsNIy\\\ufeff\x0c\n'
    texts += ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(20_000)]
    numbers = [rng.random() * 10 ** rng.randint(-320, 308) for _ in range(5_000)]
    texts += [json.dumps({"n": [n, -n, int(n) if n < 1e30 else 1]}) for n in numbers]

    for text in texts:
        expected = _json_loads_or_text(text)
        # NaN is not equal to itself: compare what both give by their repr.
        assert repr(_loads(text)) == repr(expected), text


def test_attributes_of_every_kind_flatten_as_before() -> None:
    """Text read first: empty text, zeros, lists, key-value lists and bytes still come out."""
    pairs = [
        attribute("text", "x"),
        attribute("empty", ""),
        attribute("zero", 0),
        KeyValue(key="false", value=AnyValue(bool_value=False)),
        KeyValue(key="double", value=AnyValue(double_value=0.0)),
        KeyValue(
            key="list", value=AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)]))
        ),
        KeyValue(
            key="map",
            value=AnyValue(kvlist_value=KeyValueList(values=[attribute("k", "")])),
        ),
        KeyValue(key="bytes", value=AnyValue(bytes_value=b"\x00\x01")),
        KeyValue(key="unset", value=AnyValue()),
    ]

    assert attributes_of(pairs) == {
        "text": "x",
        "empty": "",
        "zero": 0,
        "false": False,
        "double": 0.0,
        "list": [1],
        "map": {"k": ""},
        "bytes": "AAE=",
    }
