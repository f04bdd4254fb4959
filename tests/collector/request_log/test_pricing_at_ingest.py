"""Every record logged without a cost is priced at ingest from genai-prices, on every path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from genai_prices import Usage, calc_price

from promptrail._genai import build_record
from tests.collector.request_log.otlp_payloads import (
    T0,
    TRACE_ID,
    attribute,
    json_export,
    json_span,
    string_value,
)

CREATED = "2026-11-02T10:00:00Z"
AT = datetime(2026, 11, 2, 10, tzinfo=UTC)


def list_price(model: str, at: datetime = AT, **counts: int) -> float:
    """The price genai-prices itself gives a call (the reference the collector must match)."""
    return float(calc_price(Usage(**counts), model, genai_request_timestamp=at).total_price)


def logged(api: TestClient, **record: Any) -> dict[str, Any]:
    response = api.post("/v1/requests", json={"created_at": CREATED, **record})
    assert response.status_code == 201, response.text
    return detail(api, response.json()["data"]["id"])


def detail(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def cost_of(record: dict[str, Any]) -> tuple[float, bool]:
    return record["usage"]["estimated_cost_usd"], record["cost_known"]


def tokens(prompt: int, completion: int, **more: int) -> dict[str, Any]:
    return {"usage": {"prompt_tokens": prompt, "completion_tokens": completion, **more}}


def test_a_logged_call_is_priced_from_its_model_and_tokens(api: TestClient) -> None:
    record = logged(api, model="gpt-4o-mini", **tokens(1000, 500))

    assert cost_of(record) == (
        pytest.approx(list_price("gpt-4o-mini", input_tokens=1000, output_tokens=500)),
        True,
    )
    assert record["usage"]["estimated_cost_usd"] > 0


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "gpt-4o"), ("", "gpt-4o"), ("", "openai/gpt-4o"), ("anthropic", "claude-sonnet-4")],
)
def test_the_provider_is_used_or_inferred_from_the_model(
    api: TestClient, provider: str, model: str
) -> None:
    record = logged(api, model=model, provider=provider, **tokens(2000, 300))

    reference = model.removeprefix("openai/")
    assert cost_of(record) == (
        pytest.approx(list_price(reference, input_tokens=2000, output_tokens=300)),
        True,
    )


def test_the_price_is_linear_in_the_tokens(api: TestClient) -> None:
    once = logged(api, model="claude-3-5-haiku", **tokens(1234, 567))
    twice = logged(api, model="claude-3-5-haiku", **tokens(2468, 1134))

    assert cost_of(twice)[0] == pytest.approx(2 * cost_of(once)[0])


def test_cached_input_tokens_are_priced_at_the_cache_rate(api: TestClient) -> None:
    plain = logged(api, model="gpt-4o", **tokens(10_000, 100))
    cached = logged(api, model="gpt-4o", **tokens(10_000, 100, cached_tokens=8_000))

    expected = list_price("gpt-4o", input_tokens=10_000, output_tokens=100, cache_read_tokens=8_000)
    assert cost_of(cached) == (pytest.approx(expected), True)
    assert cost_of(cached)[0] < cost_of(plain)[0]


def test_reasoning_tokens_are_priced_as_genai_prices_prices_them(api: TestClient) -> None:
    record = logged(api, model="o3-mini", **tokens(500, 4000, reasoning_tokens=3500))

    expected = list_price(
        "o3-mini", input_tokens=500, output_tokens=4000, output_reasoning_tokens=3500
    )
    assert cost_of(record) == (pytest.approx(expected), True)


@pytest.mark.parametrize("sent", [0.0, 0.123])
def test_a_cost_the_client_sends_is_kept_as_sent(api: TestClient, sent: float) -> None:
    record = logged(api, model="gpt-4o", **tokens(1000, 500, estimated_cost_usd=sent))

    assert cost_of(record) == (sent, True)


@pytest.mark.parametrize(
    ("provider", "model"),
    [("", "my-local-llama"), ("vllm", "gpt-4o"), ("openai", "no-such-model"), ("", "")],
)
def test_a_model_without_a_list_price_costs_0_and_says_so(
    api: TestClient, provider: str, model: str
) -> None:
    record = logged(api, model=model, provider=provider, **tokens(1000, 500))

    assert cost_of(record) == (0.0, False)


def test_batch_records_and_sdk_captured_records_are_priced(api: TestClient) -> None:
    captured = build_record(
        "chat gpt-4o-mini",
        trace_id=int(TRACE_ID, 16),
        span_id=0x1111,
        parent_span_id=None,
        start_ns=T0,
        end_ns=T0 + 10**9,
        attrs={
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 500,
        },
        is_error=False,
        error="",
    )
    body = {"records": [captured, {"id": "req_plain", "model": "gpt-4o", **tokens(100, 10)}]}

    response = api.post("/v1/requests/batch", json=body)

    assert response.json()["data"]["accepted"] == 2, response.text
    at = datetime.fromtimestamp(T0 / 1e9, UTC)
    assert cost_of(detail(api, captured["id"])) == (
        pytest.approx(list_price("gpt-4o-mini", at, input_tokens=1000, output_tokens=500)),
        True,
    )
    assert cost_of(detail(api, "req_plain")) == (
        pytest.approx(list_price("gpt-4o", input_tokens=100, output_tokens=10)),
        True,
    )


def test_an_otlp_span_is_priced_with_its_cached_tokens(api: TestClient) -> None:
    attributes = [
        attribute("gen_ai.provider.name", string_value("openai")),
        attribute("gen_ai.request.model", string_value("gpt-4o")),
        attribute("gen_ai.usage.input_tokens", {"intValue": "5000"}),
        attribute("gen_ai.usage.output_tokens", {"intValue": "200"}),
        attribute("gen_ai.usage.cache_read.input_tokens", {"intValue": "4000"}),
    ]
    span_id = "00000000000000aa"
    export = json_export([json_span(span_id, attributes)])

    response = api.post("/v1/traces", json=export)

    assert response.status_code == 200, response.text
    at = datetime.fromtimestamp(T0 / 1e9, UTC)
    expected = list_price(
        "gpt-4o", at, input_tokens=5000, output_tokens=200, cache_read_tokens=4000
    )
    assert cost_of(detail(api, f"req_{TRACE_ID}{span_id}")) == (pytest.approx(expected), True)


def test_cost_analytics_sum_the_priced_records(api: TestClient) -> None:
    records = [
        {"model": "gpt-4o-mini", **tokens(1000, 500)},
        {"model": "gpt-4o", **tokens(3000, 100)},
        {"model": "my-local-llama", **tokens(9999, 9999)},
        {"model": "gpt-4o", **tokens(1, 1, estimated_cost_usd=0.5)},
    ]
    body = {"records": [{"created_at": CREATED, **r} for r in records]}
    assert api.post("/v1/requests/batch", json=body).json()["data"]["accepted"] == 4

    response = api.get(
        "/v1/requests/analytics",
        params={"metric": "cost", "start_date": "2026-11-01", "end_date": "2026-11-30"},
    )

    expected = (
        list_price("gpt-4o-mini", input_tokens=1000, output_tokens=500)
        + list_price("gpt-4o", input_tokens=3000, output_tokens=100)
        + 0.5
    )
    assert response.json()["data"]["total"] == pytest.approx(expected)
