"""Runs pick their credentials in the contract's order: ``<connection>/<model>``, then the
project's connection for the model's provider (the oldest), then the server's environment;
a connection's headers go with every call, and its records are tagged with its name."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.testing import AnthropicStub, OpenAIStub
from tests.collector.connections.stubs import WireStub
from tests.collector.runs.steps import create_prompt, run, stream
from tests.keys import ANTHROPIC_KEY, OPENAI_KEY

TEAM_KEY = "sk-team-connection-0001"
LATER_KEY = "sk-later-connection-0002"


def _connect(api: TestClient, **body: Any) -> None:
    response = api.post("/v1/connections", json=body)
    assert response.status_code == 201, response.text


def _record(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_without_a_connection_the_servers_environment_is_used(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    done = run(runs_api, variables={"name": "Ada"})
    assert openai_stub.calls[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert "connection" not in _record(runs_api, done["id"])["metadata"]


def test_the_projects_oldest_connection_for_the_provider_is_used_with_its_headers(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _connect(
        runs_api,
        name="team",
        provider="openai",
        api_key=TEAM_KEY,
        base_url=f"{openai_stub.url}/v1",
        headers={"X-Team": "blue", "OpenAI-Organization": "org-blue"},
    )
    _connect(
        runs_api,
        name="later",
        provider="openai",
        api_key=LATER_KEY,
        base_url=f"{openai_stub.url}/v1",
    )
    create_prompt(runs_api)
    done = run(runs_api, variables={"name": "Ada"})
    events = stream(runs_api, variables={"name": "Ada"})
    assert events[-1]["type"] == "end"
    for call in openai_stub.calls[-2:]:
        assert call.headers["authorization"] == f"Bearer {TEAM_KEY}"
        assert call.headers["x-team"] == "blue"
        assert call.headers["openai-organization"] == "org-blue"
    record = _record(runs_api, done["id"])
    assert record["metadata"]["connection"] == "team"
    assert record["model"] == "gpt-4o-mini"
    listed = runs_api.get("/v1/connections/team").json()["data"]
    assert listed["last_used_at"] is not None


def test_a_model_named_with_a_connection_goes_through_it_and_keeps_its_written_name(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _connect(
        runs_api, name="team", provider="openai", api_key=TEAM_KEY, base_url=f"{openai_stub.url}/v1"
    )
    _connect(
        runs_api,
        name="local-vllm",
        provider="openai_compatible",
        api_key="token-local-0003",
        base_url=f"{openai_stub.url}/v1",
        models=["llama-3-8b"],
    )
    create_prompt(runs_api, model="local-vllm/llama-3-8b")
    done = run(runs_api, variables={"name": "Ada"})
    call = openai_stub.calls[-1]
    assert call.body["model"] == "llama-3-8b"
    assert call.headers["authorization"] == "Bearer token-local-0003"
    record = _record(runs_api, done["id"])
    assert record["model"] == "local-vllm/llama-3-8b"
    assert record["metadata"]["connection"] == "local-vllm"

    # An openai_compatible connection also serves the models it lists by their plain name.
    create_prompt(runs_api, name="plain", model="llama-3-8b")
    run(runs_api, "/v1/prompts/plain/run", variables={"name": "Ada"})
    assert openai_stub.calls[-1].headers["authorization"] == "Bearer token-local-0003"


def test_an_anthropic_connection_sends_its_key_as_anthropic_expects(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    _connect(
        runs_api,
        name="claude-team",
        provider="anthropic",
        api_key="sk-ant-team-0004",
        base_url=anthropic_stub.url,
        headers={"anthropic-beta": "tools-2024"},
    )
    create_prompt(runs_api, model="claude-3-5-haiku-latest")
    run(runs_api, variables={"name": "Ada"})
    call = anthropic_stub.calls[-1]
    assert call.headers["x-api-key"] == "sk-ant-team-0004"
    assert call.headers["anthropic-beta"] == "tools-2024"
    assert ANTHROPIC_KEY not in call.headers.values()


def test_another_project_can_not_use_a_connection(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _connect(
        runs_api, name="team", provider="openai", api_key=TEAM_KEY, base_url=f"{openai_stub.url}/v1"
    )
    other = runs_api.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    auth = {"Authorization": f"Bearer {other}"}
    made = runs_api.post(
        "/v1/prompts",
        headers=auth,
        json={"name": "greet", "template": "Hi {{name}}", "model": "team/gpt-4o-mini"},
    )
    assert made.status_code == 201, made.text
    refused = runs_api.post(
        "/v1/prompts/greet/run", headers=auth, json={"variables": {"name": "A"}}
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "model"
    # Its runs of a plain model use the server's environment, not the other project's key.
    runs_api.post(
        "/v1/prompts",
        headers=auth,
        json={"name": "plain", "template": "Hi {{name}}", "model": "gpt-4o-mini"},
    )
    ran = runs_api.post("/v1/prompts/plain/run", headers=auth, json={"variables": {"name": "A"}})
    assert ran.status_code == 200, ran.text
    assert openai_stub.calls[-1].headers["authorization"] == f"Bearer {OPENAI_KEY}"


def test_a_provider_error_through_a_connection_does_not_carry_its_secrets(
    runs_api: TestClient, wire_stub: WireStub
) -> None:
    _connect(
        runs_api,
        name="team",
        provider="openai",
        api_key=TEAM_KEY,
        base_url=wire_stub.url,
        headers={"X-Secret": "header-secret-0005"},
    )
    wire_stub.status = 400
    wire_stub.body = {
        "error": {
            "message": f"Bad request from key {TEAM_KEY} with header-secret-0005",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    create_prompt(runs_api)
    response = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})
    assert response.status_code == 502, response.text
    assert "Bad request from key" in response.text
    assert TEAM_KEY not in response.text and "header-secret-0005" not in response.text
    record = _record(runs_api, response.json()["error"]["details"]["request_id"])
    assert TEAM_KEY not in str(record) and "header-secret-0005" not in str(record)
