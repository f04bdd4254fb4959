"""Cached (cache read), cache-write and reasoning tokens (issue 35 point 4): the batch route
stores them and the detail returns them, they are priced at their own rates, runs on the
service pass them on, and records stored before migration 21 read 0 of each."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_tables import REQUEST_ITEMS_MV_BEFORE_21
from promptrail.testing import AnthropicStub, OpenAIStub
from tests.collector.request_log.export_steps import finish, start
from tests.collector.request_log.otlp_payloads import (
    T0,
    TRACE_ID,
    attribute,
    json_export,
    json_span,
    string_value,
)
from tests.collector.runs.steps import parse_events
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH
from tests.prices import list_price, priced_with_details

CREATED = "2026-11-02T10:00:00Z"
DETAILS = ("cached_tokens", "cache_write_tokens", "reasoning_tokens")


def batch(api: TestClient, *records: dict[str, Any]) -> list[str]:
    """Post ``records`` through the batch route the SDK ships through; return their ids."""
    ids = [f"req_tokens-{i}-{id(records):x}" for i in range(len(records))]
    response = api.post(
        "/v1/requests/batch",
        json={
            "records": [
                {"id": i, "created_at": CREATED, **record}
                for i, record in zip(ids, records, strict=True)
            ]
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()["data"] if "data" in response.json() else response.json()
    assert body == {"accepted": len(records), "rejected": []}, body
    return ids


def usage_of(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    usage: dict[str, Any] = response.json()["data"]["usage"]
    return usage


def test_the_batch_route_stores_the_details_and_prices_them_at_their_own_rates(
    api: TestClient,
) -> None:
    anthropic = {
        "model": "claude-3-5-sonnet-latest",
        "provider": "anthropic",
        "usage": {
            "prompt_tokens": 10_000,
            "completion_tokens": 200,
            "cached_tokens": 6_000,
            "cache_write_tokens": 3_000,
        },
    }
    openai = {
        "model": "o3-mini",
        "provider": "openai",
        "usage": {
            "prompt_tokens": 2_000,
            "completion_tokens": 900,
            "cached_tokens": 1_024,
            "reasoning_tokens": 640,
        },
    }
    plain = {"model": "o3-mini", "usage": {"prompt_tokens": 2_000, "completion_tokens": 900}}
    first, second, third = batch(api, anthropic, openai, plain)

    claude = usage_of(api, first)
    assert {k: claude[k] for k in DETAILS} == {
        "cached_tokens": 6_000,
        "cache_write_tokens": 3_000,
        "reasoning_tokens": 0,
    }
    assert claude["prompt_tokens"] == 10_000
    expected = list_price(
        "claude-3-5-sonnet-latest",
        input_tokens=10_000,
        output_tokens=200,
        cache_read_tokens=6_000,
        cache_write_tokens=3_000,
    )
    assert claude["estimated_cost_usd"] == pytest.approx(expected)
    uncached = list_price("claude-3-5-sonnet-latest", input_tokens=10_000, output_tokens=200)
    assert expected != pytest.approx(uncached)

    o3 = usage_of(api, second)
    assert {k: o3[k] for k in DETAILS} == {
        "cached_tokens": 1_024,
        "cache_write_tokens": 0,
        "reasoning_tokens": 640,
    }
    assert o3["estimated_cost_usd"] == pytest.approx(
        list_price(
            "o3-mini",
            input_tokens=2_000,
            output_tokens=900,
            cache_read_tokens=1_024,
            output_reasoning_tokens=640,
        )
    )
    assert o3["estimated_cost_usd"] != pytest.approx(usage_of(api, third)["estimated_cost_usd"])
    assert {k: usage_of(api, third)[k] for k in DETAILS} == dict.fromkeys(DETAILS, 0)


def test_a_cache_write_field_that_is_not_a_count_is_refused(api: TestClient) -> None:
    response = api.post(
        "/v1/requests",
        json={"model": "gpt-4o", "usage": {"prompt_tokens": 5, "cache_write_tokens": -1}},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_records_stored_before_migration_21_read_zero_details(settings: Settings) -> None:
    db = f"`{settings.database}`"
    old_view = REQUEST_ITEMS_MV_BEFORE_21.select.format(db=db, local="")
    # The log and its list copy's view as the release before migration 21 made them.
    undo = [
        f"ALTER TABLE {db}.request_items_mv MODIFY QUERY {old_view}",
        *(f"ALTER TABLE {db}.requests DROP COLUMN {column}" for column in DETAILS),
    ]
    store_before(settings, 21, [], undo)
    client = open_client(settings.store_url)
    try:
        client.command(
            f"INSERT INTO {db}.requests (project, id, created_at, model, provider, status, "
            "prompt_tokens, completion_tokens, total_tokens, estimated_cost_usd, cost_known, "
            "row_version, is_deleted, kind) VALUES ('default', 'req_old-1', "
            "toDateTime64('2026-11-02 09:00:00', 3, 'UTC'), 'gpt-4o', 'openai', 'success', "
            "100, 20, 120, 0.5, true, 1, 0, 'llm')"
        )
    finally:
        client.close()

    app = create_app(settings)  # start-up applies migration 21
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        old = usage_of(api, "req_old-1")
        assert old["prompt_tokens"] == 100 and old["estimated_cost_usd"] == 0.5
        assert {k: old[k] for k in DETAILS} == dict.fromkeys(DETAILS, 0)
        (new,) = batch(
            api,
            {
                "model": "gpt-4o",
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 64},
            },
        )
        assert usage_of(api, new)["cached_tokens"] == 64
        listed = api.get("/v1/requests").json()["data"]
        assert {r["id"] for r in listed} == {"req_old-1", new}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("model", "counts"),
    [
        ("o3-mini", {"cached_tokens": 1_024, "reasoning_tokens": 256}),
        (
            "anthropic/claude-3-5-sonnet-latest",
            {"cached_tokens": 4_096, "cache_write_tokens": 2_048, "reasoning_tokens": 128},
        ),
    ],
    ids=["openai", "anthropic"],
)
def test_a_run_on_the_service_prices_and_stores_the_details(
    runs_api: TestClient,
    openai_stub: OpenAIStub,
    anthropic_stub: AnthropicStub,
    model: str,
    counts: dict[str, int],
    streamed: bool,
) -> None:
    for stub in (openai_stub, anthropic_stub):
        for name, count in counts.items():
            setattr(stub.script, name, count)
    created = runs_api.post(
        "/v1/prompts", json={"name": "cached", "template": "Summarise {doc}.", "model": model}
    )
    assert created.status_code == 201, created.text
    body = {"variables": {"doc": "the report"}}
    if streamed:
        answer = runs_api.post("/v1/prompts/cached/run", json={**body, "stream": True})
        assert answer.status_code == 200, answer.text
        (end,) = [e for e in parse_events(answer.text) if e["type"] == "end"]
        usage = end["usage"]
        request_id = runs_api.get("/v1/requests").json()["data"][0]["id"]
    else:
        answer = runs_api.post("/v1/prompts/cached/run", json=body)
        assert answer.status_code == 200, answer.text
        usage = answer.json()["data"]["usage"]
        request_id = answer.json()["data"]["id"]

    expected = {**dict.fromkeys(DETAILS, 0), **counts}
    assert {k: usage[k] for k in DETAILS} == expected
    stored = usage_of(runs_api, request_id)
    assert stored == usage
    # The prompt is every input token, the cache's included, for both providers.
    assert usage["prompt_tokens"] >= counts["cached_tokens"] + counts.get("cache_write_tokens", 0)
    with_details, without = priced_with_details(model.removeprefix("anthropic/"), usage)
    # Priced at the run's time (today), where list_price uses AT: both dates share a price.
    assert usage["estimated_cost_usd"] == pytest.approx(with_details)
    assert with_details != pytest.approx(without)


def test_an_otlp_span_s_cache_writes_are_stored_and_priced(api: TestClient) -> None:
    attributes = [
        attribute("gen_ai.provider.name", string_value("anthropic")),
        attribute("gen_ai.request.model", string_value("claude-3-5-sonnet-latest")),
        attribute("gen_ai.usage.input_tokens", {"intValue": "9000"}),
        attribute("gen_ai.usage.output_tokens", {"intValue": "300"}),
        attribute("gen_ai.usage.cache_read.input_tokens", {"intValue": "5000"}),
        attribute("gen_ai.usage.cache_creation.input_tokens", {"intValue": "2500"}),
        attribute("gen_ai.usage.reasoning.output_tokens", {"intValue": "120"}),
    ]
    span_id = "00000000000000cb"

    response = api.post("/v1/traces", json=json_export([json_span(span_id, attributes)]))

    assert response.status_code == 200, response.text
    usage = usage_of(api, f"req_{TRACE_ID}{span_id}")
    assert {k: usage[k] for k in DETAILS} == {
        "cached_tokens": 5000,
        "cache_write_tokens": 2500,
        "reasoning_tokens": 120,
    }
    with_details, without = priced_with_details(
        "claude-3-5-sonnet-latest", usage, datetime.fromtimestamp(T0 / 1e9, UTC)
    )
    assert usage["estimated_cost_usd"] == pytest.approx(with_details)
    assert with_details != pytest.approx(without)


def test_exports_carry_the_details(api: TestClient) -> None:
    batch(
        api,
        {
            "model": "gpt-4o",
            "usage": {
                "prompt_tokens": 800,
                "completion_tokens": 90,
                "cached_tokens": 512,
                "reasoning_tokens": 40,
            },
        },
    )
    found: dict[str, dict[str, int]] = {}
    for kind in ("json", "csv"):
        export_id = start(api, format=kind)["export_id"]
        finish(api, export_id)
        text = api.get(f"/v1/requests/exports/{export_id}/download").text
        if kind == "json":
            (line,) = [json.loads(row) for row in text.splitlines()]
            found[kind] = {k: line["usage"][k] for k in DETAILS}
        else:
            (row,) = csv.DictReader(io.StringIO(text, newline=""))
            found[kind] = {k: int(row[k]) for k in DETAILS}

    expected = {"cached_tokens": 512, "cache_write_tokens": 0, "reasoning_tokens": 40}
    assert found == {"json": expected, "csv": expected}
