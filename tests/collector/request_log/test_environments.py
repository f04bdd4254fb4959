"""Environments (issue 47 point 1, docs/api-notes.md "Environments"): every record has one
(default ``production``); the service's own traffic (an experiment's runs and judges) takes the
reserved ``promptrail-experiment``, which a client cannot use; every view takes ``environment=``
and, without it, hides the reserved ones, while reads by trace show every environment."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

import promptrail
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_tables import (
    REQUEST_ITEMS_MV_BEFORE_27,
    TRACE_RECORDS_MV_BEFORE_27,
)
from promptrail.collector.store.schema import View
from promptrail.collector.store.thread_tables import THREAD_ITEMS_MV_BEFORE_27
from promptrail.testing import OpenAIStub
from tests.collector.contract import assert_error
from tests.collector.experiments.steps import finished, post
from tests.collector.request_log.otlp_payloads import attribute, json_span, string_value
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def log(api: TestClient, records: list[dict[str, Any]]) -> None:
    result = post(api, "/v1/requests/batch", {"records": records})
    assert result == {"accepted": len(records), "rejected": []}, result


def ids(api: TestClient, path: str = "/v1/requests", **params: Any) -> list[str]:
    response = api.get(path, params={"limit": 100, **params})
    assert response.status_code == 200, response.text
    return [row["id"] for row in response.json()["data"]]


def usage(api: TestClient, **params: Any) -> float:
    response = api.get("/v1/requests/analytics", params={"metric": "usage", **params})
    assert response.status_code == 200, response.text
    total: float = response.json()["data"]["total"]
    return total


def three_environments(api: TestClient) -> None:
    """A production call (no environment given), a staging one and a dev one, in one trace."""
    log(
        api,
        [
            {
                "id": "req_env-prod",
                "prompt_name": "support",
                "output": "needle prod",
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            },
            {
                "id": "req_env-staging",
                "prompt_name": "support",
                "output": "needle staging",
                "environment": "staging",
                "trace_id": TRACE,
                "span_id": "00f067aa0ba902b7",
                "span_name": "answer",
                "metadata": {"session_id": "s-staging", "user_id": "u-staging"},
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            },
            {
                "id": "req_env-dev",
                "prompt_name": "support",
                "output": "needle dev",
                "environment": "dev_1",
                "usage": {"prompt_tokens": 50, "completion_tokens": 50},
            },
        ],
    )


def test_a_record_logged_in_staging_shows_with_staging_and_not_with_production(
    api: TestClient,
) -> None:
    three_environments(api)
    assert ids(api, environment="staging") == ["req_env-staging"]
    assert ids(api, environment="production") == ["req_env-prod"]
    assert set(ids(api, environment="production,dev_1")) == {"req_env-prod", "req_env-dev"}
    # Without the parameter (and with all): every environment a client logs under.
    assert (
        set(ids(api))
        == set(ids(api, environment="all"))
        == {
            "req_env-prod",
            "req_env-staging",
            "req_env-dev",
        }
    )
    # List items and details carry it; a record logged without one is production.
    listed = api.get("/v1/requests", params={"limit": 100}).json()["data"]
    assert {r["id"]: r["environment"] for r in listed} == {
        "req_env-prod": "production",
        "req_env-staging": "staging",
        "req_env-dev": "dev_1",
    }
    detail = api.get("/v1/requests/req_env-staging").json()["data"]
    assert detail["environment"] == "staging"
    # Search, analytics and exports take it too.
    assert ids(api, "/v1/requests/search", query="needle", environment="staging") == [
        "req_env-staging"
    ]
    assert usage(api, environment="staging") == 10
    assert usage(api, environment="production") == 5
    assert usage(api, filters=json.dumps({"environment": "dev_1"})) == 100
    assert usage(api) == 115
    # A trace's records show whatever the environment asked elsewhere.
    assert ids(api, trace_id=TRACE, environment="production") == []
    assert ids(api, trace_id=TRACE) == ["req_env-staging"]


def traces(api: TestClient, path: str, key: str, **params: Any) -> list[str]:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return [item[key] for item in response.json()["data"]]


def test_traces_sessions_and_users_take_the_environment(api: TestClient) -> None:
    three_environments(api)
    for path, key, value in (
        ("/v1/traces", "trace_id", TRACE),
        ("/v1/sessions", "session_id", "s-staging"),
        ("/v1/users", "user_id", "u-staging"),
    ):
        assert traces(api, path, key) == [value], path
        assert traces(api, path, key, environment="staging") == [value], path
        assert traces(api, path, key, environment="all") == [value], path
        assert traces(api, path, key, environment="production") == [], path
        assert traces(api, path, key, environment="production,dev_1") == [], path
    # Reads of one trace or session show it whatever its environment.
    assert traces(api, "/v1/traces", "trace_id", session_id="s-staging") == [TRACE]
    session = api.get("/v1/sessions/s-staging").json()["data"]
    assert [item["id"] for item in session["items"]] == ["req_env-staging"]
    trace = api.get(f"/v1/traces/{TRACE}").json()["data"]
    assert [(i["id"], i["environment"]) for i in trace["items"]] == [("req_env-staging", "staging")]


def test_a_client_cannot_log_under_a_reserved_or_malformed_name(api: TestClient) -> None:
    for name in ("promptrail-x", "promptrail-experiment"):
        response = api.post("/v1/requests", json={"output": "hi", "environment": name})
        assert_error(response, 400, "VALIDATION_ERROR", "environment")
        assert "reserved" in response.json()["error"]["message"]
    for name in ("Production", "", "a" * 41, "prod env"):
        response = api.post("/v1/requests", json={"output": "hi", "environment": name})
        assert_error(response, 400, "VALIDATION_ERROR", "environment")
    # In a batch, that record alone is rejected, by index, naming the field.
    result = post(
        api,
        "/v1/requests/batch",
        {"records": [{"output": "ok"}, {"output": "no", "environment": "promptrail-x"}]},
    )
    assert result["accepted"] == 1
    [rejected] = result["rejected"]
    assert rejected["index"] == 1
    assert rejected["error"]["details"]["field"] == "environment"
    # A malformed filter is a 400 naming the parameter.
    assert_error(api.get("/v1/requests", params={"environment": "Prod!"}), 400, "VALIDATION_ERROR")


def test_get_environments_counts_the_records_of_each(api: TestClient) -> None:
    three_environments(api)
    log(api, [{"output": f"more {i}", "environment": "staging"} for i in range(3)])
    response = api.get("/v1/environments")
    assert response.status_code == 200, response.text
    assert response.json()["data"] == [
        {"name": "dev_1", "records": 1},
        {"name": "production", "records": 1},
        {"name": "staging", "records": 4},
    ]


def test_an_experiments_runs_are_the_services_own_and_hidden_from_the_default_views(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    api = runs_api
    openai_stub.script.reply = "Paris"
    model = "gpt-4o-mini"
    post(api, "/v1/prompts", {"name": "capital", "template": "Capital of {c}?", "model": model})
    post(api, "/v1/datasets", {"name": "caps"})
    items = [{"id": f"i{n}", "input_variables": {"c": f"c{n}"}} for n in range(3)]
    post(api, "/v1/datasets/caps/items", {"items": items})
    post(api, "/v1/prompts", {"name": "judge", "template": "Rate {output}", "model": model})
    made = post(
        api,
        "/v1/experiments",
        {
            "dataset": "caps",
            "prompt": "capital",
            "evaluators": [{"name": "rated", "type": "llm_judge", "prompt": "judge"}],
        },
    )
    assert finished(api, made["id"])["status"] == "completed"
    log(api, [{"id": "req_env-real", "prompt_name": "capital", "output": "Paris"}])

    everything = api.get("/v1/requests", params={"limit": 100, "environment": "all"}).json()
    runs = [r for r in everything["data"] if r["id"] != "req_env-real"]
    # Three runs and three judge calls, all the service's own.
    assert len(runs) == 6
    assert {r["environment"] for r in runs} == {"promptrail-experiment"}
    assert set(ids(api, environment="promptrail-experiment")) == {r["id"] for r in runs}
    # The default request list, search, the review queue and analytics show the real call.
    assert ids(api) == ["req_env-real"]
    assert ids(api, prompt_name="capital") == ["req_env-real"]
    assert ids(api, unscored="thumbs") == ["req_env-real"]
    assert ids(api, "/v1/requests/search", query="Paris") == ["req_env-real"]
    assert usage(api) == 0
    assert usage(api, environment="all") > 0
    names = {e["name"]: e["records"] for e in api.get("/v1/environments").json()["data"]}
    assert names == {"production": 1, "promptrail-experiment": 6}


def test_the_sdk_clients_log_list_and_count_environments(live_url: str) -> None:
    with promptrail.Client(DEFAULT_KEY, live_url) as client:
        logged = client.requests.log(prompt_name="p", output="staged", environment="staging")
        assert logged.environment == "staging"
        client.requests.log(prompt_name="p", output="live")
        staged = list(client.requests.list(environment="staging"))
        assert [r.id for r in staged] == [logged.id]
        assert [r.environment for r in client.requests.list(environment="production")] == [
            "production"
        ]
        hits = list(client.requests.search("staged", environment="production"))
        assert hits == []
        assert [(e.name, e.records) for e in client.requests.environments()] == [
            ("production", 1),
            ("staging", 1),
        ]

    async def read() -> None:
        async with promptrail.AsyncClient(DEFAULT_KEY, live_url) as client:
            assert [e.name for e in await client.requests.environments()] == [
                "production",
                "staging",
            ]
            found = [r.id async for r in client.requests.list(environment="staging")]
            assert found == [logged.id]

    asyncio.run(read())


def test_otlp_spans_take_their_resources_deployment_environment(api: TestClient) -> None:
    call = [
        attribute("gen_ai.provider.name", string_value("mistral_ai")),
        attribute("gen_ai.request.model", string_value("mistral-small")),
    ]
    resources = [
        # The current key, the older one (an exporter's "Staging" is the name staging), none.
        ("deployment.environment.name", "dev", "00000000000000d1"),
        ("deployment.environment", "Staging", "00000000000000d2"),
        ("service.name", "app", "00000000000000d3"),
        # A resource naming the service's own is refused, that span alone, naming the field.
        ("deployment.environment", "promptrail-experiment", "00000000000000d4"),
    ]
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [attribute(key, string_value(value))]},
                "scopeSpans": [{"spans": [json_span(span_id, call)]}],
            }
            for key, value, span_id in resources
        ]
    }
    response = api.post("/v1/traces", json=document)
    assert response.status_code == 200, response.text
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "environment" in response.json()["partialSuccess"]["errorMessage"]
    listed = api.get("/v1/requests", params={"environment": "all"}).json()["data"]
    assert sorted((r["span_id"], r["environment"]) for r in listed) == [
        ("00000000000000d1", "dev"),
        ("00000000000000d2", "staging"),
        ("00000000000000d3", "production"),
    ]


def captured_call(live_url: str, stub: OpenAIStub, **init: Any) -> dict[str, Any]:
    """One chat call through the real openai SDK, captured by promptrail initialised with
    ``init``; return its record as the collector lists it (every environment)."""
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05, **init)
    promptrail.instrument()
    try:
        with openai.OpenAI(api_key="k", base_url=f"{stub.url}/v1", max_retries=0) as llm:
            llm.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        assert promptrail.flush(timeout=30)
    finally:
        promptrail.uninstrument()
        promptrail.shutdown()
    with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}) as c:
        [found] = c.get("/v1/requests", params={"environment": "all"}).json()["data"]
        listed: dict[str, Any] = found
        return listed


def test_the_sdk_ships_every_record_in_inits_environment(
    live_url: str, openai_stub: OpenAIStub
) -> None:
    record = captured_call(live_url, openai_stub, environment="staging")
    assert record["environment"] == "staging"


def test_the_sdk_takes_promptrail_environment_and_refuses_bad_names(
    live_url: str, openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROMPTRAIL_ENVIRONMENT", "canary")
    record = captured_call(live_url, openai_stub)
    assert record["environment"] == "canary"
    for bad in ("promptrail-experiment", "Staging"):
        with pytest.raises(ValueError, match="environment"):
            promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, environment=bad)


def test_a_store_from_before_environments_reads_its_records_as_production(
    settings: Settings,
) -> None:
    db = f"`{settings.database}`"

    def query_of(view: View) -> str:
        return view.select.format(db=db, local="")

    # The log, its copies and their views as the release before migration 27 made them.
    undo = [
        f"ALTER TABLE {db}.request_items_mv MODIFY QUERY {query_of(REQUEST_ITEMS_MV_BEFORE_27)}",
        f"ALTER TABLE {db}.trace_records_mv MODIFY QUERY {query_of(TRACE_RECORDS_MV_BEFORE_27)}",
        f"ALTER TABLE {db}.thread_items_mv MODIFY QUERY {query_of(THREAD_ITEMS_MV_BEFORE_27)}",
        *(
            f"ALTER TABLE {db}.{table} DROP COLUMN environment"
            for table in ("thread_items", "trace_records", "request_items", "requests")
        ),
    ]
    store_before(settings, 27, [], undo)
    client = open_client(settings.store_url)
    try:
        client.command(
            f"INSERT INTO {db}.requests (project, id, created_at, model, status, trace_id, "
            "span_id, metadata, metadata_map, total_tokens, row_version, is_deleted) VALUES "
            "('default', 'req_old-1', now64(3), 'gpt-4o-mini', 'success', "
            f"'{TRACE}', '00f067aa0ba902b7', '{{\"session_id\":\"s-old\"}}', "
            "map('session_id', 's-old'), 7, 1, 0)"
        )
    finally:
        client.close()

    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:  # migration 27 runs
        [old] = api.get("/v1/requests", params={"environment": "production"}).json()["data"]
        assert (old["id"], old["environment"]) == ("req_old-1", "production")
        assert ids(api) == ["req_old-1"]
        assert traces(api, "/v1/traces", "trace_id", environment="production") == [TRACE]
        assert traces(api, "/v1/sessions", "session_id", environment="production") == ["s-old"]
        log(api, [{"id": "req_new-1", "output": "new", "environment": "staging"}])
        assert ids(api, environment="staging") == ["req_new-1"]
        assert api.get("/v1/environments").json()["data"] == [
            {"name": "production", "records": 1},
            {"name": "staging", "records": 1},
        ]
