"""A model without a price reads as unknown, not $0 (issue 30.3, docs/api-notes.md, "Request log").

List items and run results carry ``cost_known``; analytics of the cost says how many records
of the period had no price.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.runs.steps import create_prompt, run, stream
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

AT = datetime(2026, 11, 2, 10, tzinfo=UTC)


def record(request_id: str, model: str, minutes: int = 0, **more: Any) -> dict[str, Any]:
    return {
        "id": request_id,
        "created_at": (AT + timedelta(minutes=minutes)).isoformat(),
        "model": model,
        "usage": {"prompt_tokens": 1000, "completion_tokens": 200},
        **more,
    }


def log(api: TestClient, *records: dict[str, Any]) -> None:
    response = api.post("/v1/requests/batch", json={"records": list(records)})
    assert response.status_code == 201, response.text
    assert response.json()["data"]["rejected"] == []


def listed(api: TestClient, **params: str) -> dict[str, dict[str, Any]]:
    response = api.get("/v1/requests", params=params)
    assert response.status_code == 200, response.text
    return {item["id"]: item for item in response.json()["data"]}


def cost_analytics(api: TestClient, **params: str) -> dict[str, Any]:
    response = api.get(
        "/v1/requests/analytics",
        params={"metric": "cost", "start_date": "2026-11-01", "end_date": "2026-11-03", **params},
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_list_items_say_whether_the_cost_is_known(api: TestClient) -> None:
    log(
        api,
        record("req_priced", "gpt-4o-mini"),
        record("req_free", "my-finetune-xyz", 1),
        # A cost the client sends counts as known, 0 included.
        record("req_sent_zero", "my-finetune-xyz", 2, usage={"estimated_cost_usd": 0}),
    )

    items = listed(api)

    shown = {i: (r["cost_known"], r["usage"]["estimated_cost_usd"] > 0) for i, r in items.items()}
    assert shown == {
        "req_priced": (True, True),
        "req_free": (False, False),
        "req_sent_zero": (True, False),
    }
    # The same flag through the metadata index's page.
    log(api, record("req_tagged", "gpt-9-ultra", 3, metadata={"team": "a"}))
    assert listed(api, **{"metadata.team": "a"})["req_tagged"]["cost_known"] is False


def test_a_run_result_says_whether_the_cost_is_known(runs_api: TestClient) -> None:
    create_prompt(runs_api, name="priced", model="gpt-4o-mini")
    create_prompt(runs_api, name="local", model="openai/my-local-model")

    priced = run(runs_api, "/v1/prompts/priced/run", variables={"name": "Ada"})
    local = run(runs_api, "/v1/prompts/local/run", variables={"name": "Ada"})
    priced_end = stream(runs_api, "/v1/prompts/priced/run", variables={"name": "Ada"})[-1]
    local_end = stream(runs_api, "/v1/prompts/local/run", variables={"name": "Ada"})[-1]

    assert (priced["cost_known"], local["cost_known"]) == (True, False)
    assert local["usage"]["estimated_cost_usd"] == 0
    assert priced_end["type"] == local_end["type"] == "end"
    assert (priced_end["cost_known"], local_end["cost_known"]) == (True, False)


def test_cost_analytics_count_the_records_without_a_price(api: TestClient) -> None:
    log(
        api,
        record("req_a", "gpt-4o-mini", metadata={"team": "a"}),
        record("req_b", "gpt-9-ultra", 1, metadata={"team": "a"}),
        record("req_c", "my-finetune-xyz", 2, metadata={"team": "b"}),
        record("req_d", "my-finetune-xyz", 3, metadata={"team": "gone"}),
        # Outside the period.
        record("req_e", "my-finetune-xyz", 60 * 24 * 5),
    )
    # A retried copy counts once, a deleted record not at all.
    log(api, record("req_b", "gpt-9-ultra", 1, metadata={"team": "a"}))
    deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"team": "gone"}})
    assert deleted.json()["data"]["deleted_count"] == 1

    everything = cost_analytics(api)
    team_a = cost_analytics(api, filters=json.dumps({"metadata": {"team": "a"}}))
    by_model = cost_analytics(api, group_by="model")
    usage = api.get("/v1/requests/analytics", params={"metric": "usage"}).json()["data"]

    assert everything["cost_unknown_records"] == 2
    assert everything["total"] > 0
    assert team_a["cost_unknown_records"] == 1
    assert by_model["cost_unknown_records"] == 2
    assert "cost_unknown_records" not in usage


def test_records_stored_before_the_flag_was_listed_read_it_after_the_upgrade(
    settings: Settings,
) -> None:
    rows = [
        RequestRow(id="req_old-priced", created_at=AT, model="gpt-4o", cost_known=True),
        RequestRow(id="req_old-free", created_at=AT + timedelta(minutes=1), model="mine"),
    ]
    # Migration 8 makes the items copy as defined today: take the column out as before.
    drop = f"ALTER TABLE `{settings.database}`.request_items DROP COLUMN cost_known"
    store_before(settings, 14, rows, [drop])

    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        items = listed(api)

    assert {i: r["cost_known"] for i, r in items.items()} == {
        "req_old-priced": True,
        "req_old-free": False,
    }
