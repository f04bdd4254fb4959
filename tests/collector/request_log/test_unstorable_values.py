"""Values the store cannot keep (lone surrogates, nesting past the limit) are a 400 naming the
field on every write route, never a 500, and a batch keeps its other records (docs/api-notes.md,
"Request log")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.contract import assert_error
from tests.collector.request_log.otlp_payloads import json_export, json_span

JSON = {"Content-Type": "application/json"}


def nested(depth: int) -> str:
    """JSON text of ``depth`` arrays, one inside the other."""
    return "[" * depth + "]" * depth


def logged_ids(api: TestClient) -> list[str]:
    response = api.get("/v1/requests", params={"limit": 100})
    assert response.status_code == 200, response.text
    return sorted(item["id"] for item in response.json()["data"])


@pytest.mark.parametrize("depth", [250, 3000])
@pytest.mark.parametrize("field", ["metadata", "input"])
def test_a_deeply_nested_record_of_a_batch_is_refused_alone(
    api: TestClient, depth: int, field: str
) -> None:
    value = '{"k": ' + nested(depth) + "}" if field == "metadata" else nested(depth)
    bad = '{"id": "req_deep", "' + field + '": ' + value + "}"
    body = '{"records": [{"id": "req_a"}, ' + bad + ', {"id": "req_b"}]}'

    response = api.post("/v1/requests/batch", content=body, headers=JSON)

    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["accepted"] == 2
    assert [r["index"] for r in data["rejected"]] == [1]
    error = data["rejected"][0]["error"]
    assert (error["code"], error["type"]) == ("VALIDATION_ERROR", "validation_error")
    assert "200 levels" in error["message"]
    assert logged_ids(api) == ["req_a", "req_b"]


def test_nesting_up_to_the_limit_is_stored_whole(api: TestClient) -> None:
    body = '{"records": [{"id": "req_deep", "input": ' + nested(200) + "}]}"

    response = api.post("/v1/requests/batch", content=body, headers=JSON)

    assert response.json()["data"]["accepted"] == 1, response.text
    stored = api.get("/v1/requests/req_deep").json()["data"]["input"]
    depth = 0
    while stored is not None:
        depth += 1
        stored = stored[0] if stored else None
    assert depth == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"output": "x\\ud800y"}', "output"),
        ('{"output": {"text": ["ok", "\\udfff"]}}', "output.text.1"),
        ('{"input": [{"role": "user", "content": "\\ud800"}]}', "input.0.content"),
        ('{"metadata": {"k": "\\ud800"}}', "metadata.k"),
        ('{"input_variables": {"q": "\\ud800"}}', "input_variables.q"),
        ('{"input": ' + nested(300) + "}", "input"),
    ],
)
def test_a_record_the_store_cannot_keep_is_400_naming_the_field(
    api: TestClient, body: str, field: str
) -> None:
    response = api.post("/v1/requests", content=body, headers=JSON)

    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert logged_ids(api) == []


def test_a_lone_surrogate_in_a_batch_names_the_field_and_keeps_the_others(
    api: TestClient,
) -> None:
    body = '{"records": [{"id": "req_a"}, {"id": "req_bad", "output": "x\\ud800"}]}'

    response = api.post("/v1/requests/batch", content=body, headers=JSON)

    data = response.json()["data"]
    assert data["accepted"] == 1, response.text
    assert data["rejected"][0]["error"]["details"]["field"] == "output"
    assert logged_ids(api) == ["req_a"]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/prompts", {"parameters": {"x": "\\ud800"}}, "parameters"),
        ("POST", "/v1/prompts", {"parameters": {"x": "NESTED"}}, "parameters"),
        ("PATCH", "/v1/prompts/p", {"parameters": {"\\ud800": 1}}, "parameters"),
        ("POST", "/v1/requests/export", {"filters": {"metadata": {"k": "\\ud800"}}}, "filters"),
        ("DELETE", "/v1/requests", {"metadata": {"k": "\\ud800"}}, "metadata"),
        ("DELETE", "/v1/requests", {"metadata": {"k": "NESTED"}}, "metadata"),
    ],
)
def test_other_write_routes_refuse_what_cannot_be_stored(
    api: TestClient, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    created = api.post("/v1/prompts", json={"name": "p", "template": "t", "model": "gpt-4o"})
    assert created.status_code == 201
    if method == "POST" and path == "/v1/prompts":
        body = {"name": "q", "template": "t", "model": "gpt-4o", **body}
    raw = _raw(body).replace('"NESTED"', nested(300))

    response = api.request(method, path, content=raw, headers=JSON)

    assert_error(response, 400, "VALIDATION_ERROR", field)
    assert [p["name"] for p in api.get("/v1/prompts").json()["data"]] == ["p"]
    assert len(api.get("/v1/prompts/p/versions").json()["data"]) == 1


def _raw(body: dict[str, Any]) -> str:
    """JSON text of ``body`` keeping ``\\ud800``-style escapes as written (json.dumps would not)."""
    return json.dumps(body).replace("\\\\u", "\\u")


def test_an_otlp_json_export_with_a_lone_surrogate_is_400_and_stores_nothing(
    api: TestClient,
) -> None:
    span = json_span(
        "00000000000000ab",
        [
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
            {"key": "gen_ai.output.messages", "value": {"stringValue": "SURROGATE"}},
        ],
    )
    raw = json.dumps(json_export([span])).replace("SURROGATE", "\\ud800")

    response = api.post("/v1/traces", content=raw, headers=JSON)

    assert_error(response, 400, "VALIDATION_ERROR", "body")
    assert logged_ids(api) == []
