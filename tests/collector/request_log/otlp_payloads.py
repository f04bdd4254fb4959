"""OTLP/JSON export bodies as an exporter sends them: spans, attributes, one trace's ids."""

from __future__ import annotations

from typing import Any

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in nanoseconds
TRACE_ID = "5b8efff798038103d269b633813fc60c"
PARENT_ID = "0102030405060708"


def string_value(value: str) -> dict[str, Any]:
    """An OTLP/JSON string value."""
    return {"stringValue": value}


def attribute(key: str, value: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON attribute: a key and its typed value."""
    return {"key": key, "value": value}


def json_export(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [attribute("service.name", string_value("json-app"))]},
                "scopeSpans": [{"scope": {"name": "hand-built"}, "spans": spans}],
            }
        ]
    }


def json_span(span_id: str, attributes: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "traceId": TRACE_ID,
        "spanId": span_id,
        "parentSpanId": PARENT_ID,
        "name": "chat mistral-small",
        "kind": 3,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 1_234_000_000),
        "attributes": attributes,
        "status": {},
        **fields,
    }
