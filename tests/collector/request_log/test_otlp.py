"""OTLP/HTTP trace ingest: real OpenTelemetry exporters and instrumentation, over real sockets."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from promptrail._genai import record_id
from promptrail.testing import serve_stub
from tests.collector.request_log.otlp_payloads import (
    PARENT_ID,
    T0,
    TRACE_ID,
    attribute,
    json_export,
    json_span,
    string_value,
)
from tests.keys import DEFAULT_KEY
from tests.openllmetry import openllmetry_instrumented

AUTH = {"Authorization": f"Bearer {DEFAULT_KEY}"}
PROTOBUF = "application/x-protobuf"


class _Recording(SpanExporter):
    """Pass spans to the real OTLP exporter and keep what each export returned."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


@dataclass
class Tracing:
    """A tracer provider whose spans go to the live collector over OTLP/HTTP protobuf."""

    provider: TracerProvider
    otlp: _Recording
    finished: InMemorySpanExporter
    tracer: Tracer = field(init=False)

    def __post_init__(self) -> None:
        self.tracer = self.provider.get_tracer("tests.otlp")


@pytest.fixture
def client(live_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_url, headers=AUTH, timeout=30) as http:
        yield http


def _tracing(live_url: str, compression: Compression) -> Tracing:
    exporter = OTLPSpanExporter(
        endpoint=f"{live_url}/v1/traces", headers=AUTH, compression=compression, timeout=30
    )
    provider = TracerProvider()
    otlp = _Recording(exporter)
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(otlp))
    provider.add_span_processor(SimpleSpanProcessor(finished))
    return Tracing(provider, otlp, finished)


@pytest.fixture(params=[Compression.NoCompression, Compression.Gzip], ids=["plain", "gzip"])
def tracing(live_url: str, request: pytest.FixtureRequest) -> Iterator[Tracing]:
    setup = _tracing(live_url, request.param)
    yield setup
    setup.provider.shutdown()


def get_record(client: httpx.Client, span: Span) -> dict[str, Any]:
    context = span.get_span_context()
    response = client.get(f"/v1/requests/{record_id(context.trace_id, context.span_id)}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def record_ids(client: httpx.Client) -> list[str]:
    response = client.get("/v1/requests", params={"limit": 100})
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["data"]]


def post_protobuf(client: httpx.Client, spans: Sequence[ReadableSpan]) -> httpx.Response:
    body = encode_spans(spans).SerializeToString()
    return client.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF})


def parse_response(response: httpx.Response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == PROTOBUF
    parsed: ExportTraceServiceResponse = ExportTraceServiceResponse.FromString(response.content)
    return parsed


CURRENT_ATTRIBUTES: dict[str, Any] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.input.messages": json.dumps(
        [
            {"role": "system", "parts": [{"type": "text", "content": "Answer briefly."}]},
            {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]},
        ]
    ),
    "gen_ai.output.messages": json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Paris."}],
                "finish_reason": "stop",
            }
        ]
    ),
    "gen_ai.usage.input_tokens": 11,
    "gen_ai.usage.output_tokens": 3,
    "gen_ai.response.id": "chatcmpl-123",
    "gen_ai.response.finish_reasons": ["stop"],
}


# --- (1) protobuf from the real OTLP exporter -------------------------------------------------


def test_genai_span_becomes_a_record_and_plain_spans_are_skipped(
    tracing: Tracing, client: httpx.Client
) -> None:
    parent = tracing.tracer.start_span("handle request", start_time=T0)
    with tracing.tracer.start_as_current_span("plain work", start_time=T0):
        pass
    child = tracing.tracer.start_span(
        "chat gpt-4o-mini",
        context=set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        attributes=CURRENT_ATTRIBUTES,
        start_time=T0 + 1_000_000,
    )
    child.end(end_time=T0 + 751_000_000)
    parent.end(end_time=T0 + 800_000_000)

    assert tracing.otlp.results == [SpanExportResult.SUCCESS] * 3
    record = get_record(client, child)
    context, parent_context = child.get_span_context(), parent.get_span_context()
    assert record["id"] == f"req_{context.trace_id:032x}{context.span_id:016x}"
    assert record["model"] == "gpt-4o-mini-2024-07-18"
    assert record["provider"] == "openai"
    assert record["status"] == "success"
    assert record["input"] == [
        {"role": "system", "parts": [{"type": "text", "content": "Answer briefly."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Capital of France?"}]},
    ]
    assert record["output"] == {
        "content": "Paris.",
        "finish_reason": "stop",
        "response_id": "chatcmpl-123",
    }
    assert record["usage"]["prompt_tokens"] == 11
    assert record["usage"]["completion_tokens"] == 3
    assert record["usage"]["total_tokens"] == 14
    assert record["trace_id"] == f"{context.trace_id:032x}"
    assert record["span_id"] == f"{context.span_id:016x}"
    assert record["parent_span_id"] == f"{parent_context.span_id:016x}"
    assert record["span_name"] == "chat gpt-4o-mini"
    assert record["timing"]["total_latency_ms"] == 750
    assert record["created_at"].startswith("2026-01-01T00:00:00.001")
    assert record.get("error") is None
    # The parent and the plain span made no record.
    assert record_ids(client) == [record["id"]]


def test_plain_spans_are_not_rejected(tracing: Tracing, client: httpx.Client) -> None:
    with tracing.tracer.start_as_current_span("db query", attributes={"db.system": "postgres"}):
        pass

    answer = parse_response(post_protobuf(client, tracing.finished.get_finished_spans()))

    assert not answer.HasField("partial_success")
    assert record_ids(client) == []


def test_error_span_becomes_an_error_record(tracing: Tracing, client: httpx.Client) -> None:
    with tracing.tracer.start_as_current_span("chat", attributes=CURRENT_ATTRIBUTES) as failed:
        failed.set_status(Status(StatusCode.ERROR, "rate limited"))
    with tracing.tracer.start_as_current_span("chat", attributes=CURRENT_ATTRIBUTES) as raised:
        raised.record_exception(RuntimeError("connection reset"))
        raised.set_status(Status(StatusCode.ERROR))

    assert tracing.otlp.results == [SpanExportResult.SUCCESS] * 2
    first, second = get_record(client, failed), get_record(client, raised)
    assert (first["status"], first["error"]) == ("error", "rate limited")
    assert (second["status"], second["error"]) == ("error", "connection reset")


def test_re_exported_span_is_stored_once(tracing: Tracing, client: httpx.Client) -> None:
    with tracing.tracer.start_as_current_span("chat", attributes=CURRENT_ATTRIBUTES) as span:
        pass
    spans = tracing.finished.get_finished_spans()

    for _ in range(3):
        assert tracing.otlp.inner.export(spans) == SpanExportResult.SUCCESS

    assert record_ids(client) == [get_record(client, span)["id"]]


def test_spans_that_cannot_be_stored_are_reported_as_partial_success(
    tracing: Tracing, client: httpx.Client
) -> None:
    with tracing.tracer.start_as_current_span("good", attributes=CURRENT_ATTRIBUTES) as good:
        pass
    too_long = {**CURRENT_ATTRIBUTES, "gen_ai.response.model": "m" * 300}
    with tracing.tracer.start_as_current_span("bad", attributes=too_long):
        pass

    answer = parse_response(post_protobuf(client, tracing.finished.get_finished_spans()))

    assert answer.partial_success.rejected_spans == 1
    assert "span 'bad'" in answer.partial_success.error_message
    assert "model" in answer.partial_success.error_message
    assert record_ids(client) == [get_record(client, good)["id"]]


# --- (2) deprecated attributes and OpenInference ----------------------------------------------


DEPRECATED_GENAI: dict[str, Any] = {
    "gen_ai.system": "anthropic",
    "gen_ai.request.model": "claude-3-5-haiku",
    "gen_ai.prompt.0.role": "system",
    "gen_ai.prompt.0.content": "Be terse.",
    "gen_ai.prompt.1.role": "user",
    "gen_ai.prompt.1.content": "Largest planet?",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": "Jupiter.",
    "gen_ai.completion.0.finish_reason": "end_turn",
    "gen_ai.usage.prompt_tokens": 17,
    "gen_ai.usage.completion_tokens": 4,
}
OPENINFERENCE: dict[str, Any] = {
    "openinference.span.kind": "LLM",
    "llm.provider": "openai",
    "llm.model_name": "gpt-4.1-nano",
    "llm.input_messages.0.message.role": "user",
    "llm.input_messages.0.message.content": "Two plus two?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.content": "Four.",
    "llm.token_count.prompt": 9,
    "llm.token_count.completion": 2,
}


@pytest.mark.parametrize(
    ("span_name", "attributes", "expected"),
    [
        pytest.param(
            "anthropic.chat",
            DEPRECATED_GENAI,
            {
                "provider": "anthropic",
                "model": "claude-3-5-haiku",
                "input": [
                    {"role": "system", "content": "Be terse."},
                    {"role": "user", "content": "Largest planet?"},
                ],
                "output": {"content": "Jupiter.", "finish_reason": "end_turn"},
                "tokens": (17, 4),
            },
            id="deprecated-genai",
        ),
        pytest.param(
            "ChatCompletion",
            OPENINFERENCE,
            {
                "provider": "openai",
                "model": "gpt-4.1-nano",
                "input": [{"role": "user", "content": "Two plus two?"}],
                "output": {"content": "Four."},
                "tokens": (9, 2),
            },
            id="openinference",
        ),
    ],
)
def test_deprecated_genai_and_openinference_attributes_become_records(
    tracing: Tracing,
    client: httpx.Client,
    span_name: str,
    attributes: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    with tracing.tracer.start_as_current_span(span_name, attributes=attributes) as span:
        pass

    record = get_record(client, span)

    usage = record["usage"]
    assert {
        "provider": record["provider"],
        "model": record["model"],
        "input": record["input"],
        "output": record["output"],
        "tokens": (usage["prompt_tokens"], usage["completion_tokens"]),
    } == expected


# --- (3) OTLP JSON ----------------------------------------------------------------------------

SPAN_ID = "eee19b7ec3c1b174"


JSON_ATTRIBUTES = [
    attribute("gen_ai.provider.name", string_value("mistral_ai")),
    attribute("gen_ai.request.model", string_value("mistral-small")),
    attribute("gen_ai.usage.input_tokens", {"intValue": "21"}),
    attribute("gen_ai.usage.output_tokens", {"intValue": "5"}),
    attribute(
        "gen_ai.response.finish_reasons", {"arrayValue": {"values": [string_value("length")]}}
    ),
    attribute(
        "gen_ai.input.messages",
        {
            "arrayValue": {
                "values": [
                    {
                        "kvlistValue": {
                            "values": [
                                attribute("role", string_value("user")),
                                attribute("content", string_value("Name a colour.")),
                            ]
                        }
                    }
                ]
            }
        },
    ),
    attribute("gen_ai.output.messages", string_value('[{"role": "assistant", "content": "Teal"}]')),
    attribute(
        "promptrail.metadata",
        {
            "kvlistValue": {
                "values": [
                    attribute("user_id", string_value("u-7")),
                    attribute("tier", {"intValue": "2"}),
                    attribute("beta", {"boolValue": True}),
                    attribute("score", {"doubleValue": 0.5}),
                ]
            }
        },
    ),
]


def post_json(
    client: httpx.Client, document: dict[str, Any], *, compress: bool = False
) -> httpx.Response:
    body = json.dumps(document).encode()
    headers = {"Content-Type": "application/json"}
    if compress:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    return client.post("/v1/traces", content=body, headers=headers)


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "plain"])
def test_otlp_json_export(client: httpx.Client, compress: bool) -> None:
    plain = {
        "traceId": TRACE_ID,
        "spanId": "0000000000000abc",
        "name": "plain",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0),
    }
    document = json_export([json_span(SPAN_ID, JSON_ATTRIBUTES), plain])

    response = post_json(client, document, compress=compress)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {}
    record = client.get(f"/v1/requests/req_{TRACE_ID}{SPAN_ID}").json()["data"]
    assert record["provider"] == "mistral_ai"
    assert record["model"] == "mistral-small"
    assert (record["usage"]["prompt_tokens"], record["usage"]["completion_tokens"]) == (21, 5)
    assert record["input"] == [{"role": "user", "content": "Name a colour."}]
    assert record["output"] == {"content": "Teal", "finish_reason": "length"}
    assert record["metadata"] == {"user_id": "u-7", "tier": 2, "beta": True, "score": 0.5}
    assert (record["trace_id"], record["span_id"]) == (TRACE_ID, SPAN_ID)
    assert record["parent_span_id"] == PARENT_ID
    assert record["timing"]["total_latency_ms"] == 1234
    assert record["status"] == "success"
    assert record_ids(client) == [f"req_{TRACE_ID}{SPAN_ID}"]


def test_otlp_json_error_status_and_partial_success(client: httpx.Client) -> None:
    failed = json_span(
        "00000000000000e1",
        JSON_ATTRIBUTES,
        status={"code": 2, "message": "upstream 500"},
    )
    bad_id = json_span("0102", JSON_ATTRIBUTES)  # 2 bytes: not a span id
    too_many_tokens = json_span(
        "00000000000000e2",
        [*JSON_ATTRIBUTES, attribute("gen_ai.usage.output_tokens", {"intValue": str(2**40)})],
    )
    # A plain span with a broken id is skipped, not rejected.
    plain = {"traceId": "01", "spanId": "02", "name": "plain"}

    response = post_json(client, json_export([failed, bad_id, too_many_tokens, plain]))

    assert response.status_code == 200, response.text
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert "span_id must be 8 bytes" in partial["errorMessage"]
    assert "completion_tokens" in partial["errorMessage"]
    record = client.get(f"/v1/requests/req_{TRACE_ID}00000000000000e1").json()["data"]
    assert (record["status"], record["error"]) == ("error", "upstream 500")
    assert record_ids(client) == [record["id"]]


def test_api_prefix_and_x_api_key_are_served(live_url: str) -> None:
    document = json_export([json_span(SPAN_ID, JSON_ATTRIBUTES)])

    response = httpx.post(
        f"{live_url}/api/v1/traces", json=document, headers={"X-API-Key": DEFAULT_KEY}
    )

    assert response.status_code == 200, response.text
    assert response.json() == {}


# --- (4) auth, (5) bad bodies ------------------------------------------------------------------


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer pr-wrong"}], ids=["none", "bad"])
def test_export_without_a_valid_key_is_401(live_url: str, headers: dict[str, str]) -> None:
    exporter: SpanExporter = OTLPSpanExporter(
        endpoint=f"{live_url}/v1/traces", headers=headers, timeout=30
    )
    provider = TracerProvider()
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    with provider.get_tracer("t").start_as_current_span("chat", attributes=CURRENT_ATTRIBUTES):
        pass
    spans = finished.get_finished_spans()

    assert exporter.export(spans) == SpanExportResult.FAILURE
    response = httpx.post(
        f"{live_url}/v1/traces",
        content=encode_spans(spans).SerializeToString(),
        headers={"Content-Type": PROTOBUF, **headers},
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "INVALID_API_KEY"
    exporter.shutdown()
    provider.shutdown()


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (PROTOBUF, b"\x0a\xff\x01"),
        (PROTOBUF, b"not protobuf at all"),
        ("application/json", b"{not json"),
        ("application/json", b"[]"),
        ("application/json", b'{"resourceSpans": 5}'),
        ("application/json", json.dumps(json_export([{"traceId": "xyz"}])).encode()),
        ("application/json; charset=utf-8", b'{"resourceSpans": [{"scopeSpans": "no"}]}'),
    ],
)
def test_malformed_bodies_are_400_naming_body(
    client: httpx.Client, content_type: str, body: bytes
) -> None:
    response = client.post("/v1/traces", content=body, headers={"Content-Type": content_type})

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("VALIDATION_ERROR", "validation_error")
    assert error["details"]["field"] == "body"


@pytest.mark.parametrize("content_type", ["text/plain", "application/protobuf", None])
def test_other_content_types_are_415(client: httpx.Client, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}

    response = client.post("/v1/traces", content=b"{}", headers=headers)

    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("UNSUPPORTED_MEDIA_TYPE", "validation_error")
    assert error["details"]["supported"] == [PROTOBUF, "application/json"]


def test_openapi_documents_both_encodings(client: httpx.Client) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/traces"]["post"]

    assert set(operation["requestBody"]["content"]) == {PROTOBUF, "application/json"}
    assert set(operation["responses"]["200"]["content"]) == {PROTOBUF, "application/json"}
    assert operation["responses"]["415"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ErrorBody"
    )
    assert "422" not in operation["responses"]


# --- (6) OpenLLMetry's openai instrumentation driving the real openai SDK --------------------


class ChatStub:
    """Answer chat completions like OpenAI does; 404 for model ``missing``."""

    def __init__(self) -> None:
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])
        self.url = ""

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        if body["model"] == "missing":
            error = {"message": "The model `missing` does not exist", "type": "invalid_request"}
            return JSONResponse({"error": error}, status_code=404)
        return JSONResponse(
            {
                "id": "chatcmpl-stub-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": f"{body['model']}-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Bonjour!"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
            }
        )


@pytest.fixture(scope="module")
def chat_stub() -> Iterator[ChatStub]:
    """A minimal OpenAI chat endpoint on a socket, for the OpenLLMetry instrumentation."""
    with serve_stub(ChatStub()) as stub:
        yield stub


@pytest.fixture
def instrumented(live_url: str) -> Iterator[Tracing]:
    setup = _tracing(live_url, Compression.NoCompression)
    with openllmetry_instrumented(setup.provider):
        yield setup
    setup.provider.shutdown()


# The instrumentation's first import trips a pydantic deprecation warning in its own code.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
def test_openllmetry_openai_spans_become_records(
    instrumented: Tracing, chat_stub: ChatStub, client: httpx.Client
) -> None:
    sdk = openai.OpenAI(base_url=f"{chat_stub.url}/v1", api_key="sk-stub", max_retries=0)

    answer = sdk.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello in French."}]
    )
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="missing", messages=[{"role": "user", "content": "x"}])
    sdk.close()

    assert answer.choices[0].message.content == "Bonjour!"
    assert instrumented.otlp.results == [SpanExportResult.SUCCESS] * 2
    ok_span, failed_span = instrumented.finished.get_finished_spans()
    ok = client.get(f"/v1/requests/{_record_id_of(ok_span)}").json()["data"]
    assert ok["model"] == "gpt-4o-mini-2024-07-18"
    assert ok["provider"] == "openai"
    assert ok["status"] == "success"
    assert ok["output"]["content"] == "Bonjour!"
    assert ok["output"]["finish_reason"] == "stop"
    assert (ok["usage"]["prompt_tokens"], ok["usage"]["completion_tokens"]) == (12, 4)
    assert "Say hello in French." in json.dumps(ok["input"])
    failed = client.get(f"/v1/requests/{_record_id_of(failed_span)}").json()["data"]
    assert failed["status"] == "error"
    assert failed["model"] == "missing"
    assert "does not exist" in failed["error"]
    assert sorted(record_ids(client)) == sorted([ok["id"], failed["id"]])


def _record_id_of(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return record_id(context.trace_id, context.span_id)
