"""Experiments go through connections in the same credential order as runs, held to the same
budget; a base URL that has become link-local since it was stored is refused at call time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi.testclient import TestClient

from promptrail.testing import OpenAIStub
from tests.collector.experiments.steps import finished, post, results
from tests.collector.runs.steps import create_prompt

LOCAL_KEY = "token-local-experiments-01"


def _setup(api: TestClient, stub: OpenAIStub, **connection: Any) -> None:
    made = api.post(
        "/v1/connections",
        json={
            "name": "local",
            "provider": "openai_compatible",
            "api_key": LOCAL_KEY,
            "base_url": f"{stub.url}/v1",
            "models": ["llama-3-8b"],
            **connection,
        },
    )
    assert made.status_code == 201, made.text
    create_prompt(api)
    post(api, "/v1/datasets", {"name": "people"})
    items = [{"id": f"p{n}", "input_variables": {"name": f"N{n}"}} for n in range(3)]
    post(api, "/v1/datasets/people/items", {"items": items})


def test_an_experiment_on_a_connections_model_goes_through_it(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _setup(runs_api, openai_stub)
    made = post(
        runs_api,
        "/v1/experiments",
        {"dataset": "people", "prompt": "greet", "model": "local/llama-3-8b"},
    )
    assert finished(runs_api, made["id"])["status"] == "completed"
    done = results(runs_api, made["id"])
    assert [r["status"] for r in done] == ["success"] * 3
    for call in openai_stub.calls[-3:]:
        assert call.headers["authorization"] == f"Bearer {LOCAL_KEY}"
        assert call.body["model"] == "llama-3-8b"
    record = runs_api.get(f"/v1/requests/{done[0]['request_id']}").json()["data"]
    assert record["model"] == "local/llama-3-8b"
    assert record["metadata"]["connection"] == "local"


def test_an_experiment_through_a_connection_at_its_budget_calls_nothing(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _setup(runs_api, openai_stub, monthly_budget_usd=0)
    calls = len(openai_stub.calls)
    made = post(
        runs_api,
        "/v1/experiments",
        {"dataset": "people", "prompt": "greet", "model": "local/llama-3-8b"},
    )
    finished(runs_api, made["id"])
    done = results(runs_api, made["id"])
    assert [r["status"] for r in done] == ["error"] * 3
    assert all("monthly budget" in r["error"] for r in done)
    assert len(openai_stub.calls) == calls


def test_an_experiment_on_a_model_nothing_serves_is_refused_at_create(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _setup(runs_api, openai_stub)
    response = runs_api.post(
        "/v1/experiments", json={"dataset": "people", "prompt": "greet", "model": "nope/llama"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "model"


def test_a_base_url_that_became_link_local_is_refused_at_call_time(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _setup(runs_api, openai_stub)
    # What a name that now resolves to the metadata address amounts to: the stored URL's
    # host is link-local when the call is made.
    connections = runs_api.app.state.services.connections  # type: ignore[attr-defined]
    row = connections.find("default", "local")
    moved = replace(row, base_url="http://169.254.169.254/v1")
    connections._store.put("default", moved)
    connections._cache.clear()
    create_prompt(runs_api, name="local-greet", model="local/llama-3-8b")
    calls = len(openai_stub.calls)
    refused = runs_api.post("/v1/prompts/local-greet/run", json={"variables": {"name": "Ada"}})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["details"]["field"] == "base_url"
    checked = runs_api.post("/v1/connections/local/check")
    assert checked.status_code == 400
    assert len(openai_stub.calls) == calls
