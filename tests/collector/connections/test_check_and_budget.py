"""A connection's check tells a bad key from an unreachable server from an exhausted quota;
a connection at its monthly budget refuses calls (402) before they reach the provider."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.testing import OpenAIStub, free_port
from tests.collector.connections.stubs import WireStub
from tests.collector.runs.steps import create_prompt, run

KEY = "sk-check-key-0001"

# The providers' own error bodies.
OPENAI_BAD_KEY = {
    "error": {
        "message": "Incorrect API key provided: sk-check***0001. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
OPENAI_NO_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
OPENAI_RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
ANTHROPIC_BAD_KEY = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
}
ANTHROPIC_NO_CREDIT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "Your credit balance is too low to access the Anthropic API. Please go to "
        "Plans & Billing to upgrade or purchase credits.",
    },
}
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-3-5-haiku-latest",
    "content": [{"type": "text", "text": "p"}],
    "stop_reason": "max_tokens",
    "usage": {"input_tokens": 8, "output_tokens": 1},
}


def _connect(api: TestClient, **body: Any) -> dict[str, Any]:
    response = api.post("/v1/connections", json={"name": "c", "api_key": KEY, **body})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def _check(api: TestClient) -> dict[str, Any]:
    response = api.post("/v1/connections/c/check")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    assert KEY not in response.text
    assert isinstance(data["latency_ms"], int) and data["latency_ms"] >= 0
    return data


@pytest.mark.parametrize(
    ("provider", "status", "body", "expected"),
    [
        ("openai", 401, OPENAI_BAD_KEY, "auth_invalid"),
        ("openai", 429, OPENAI_NO_QUOTA, "quota_exceeded"),
        ("openai", 429, OPENAI_RATE_LIMITED, "error"),
        ("openai", 500, {"error": {"message": "The server had an error"}}, "error"),
        ("anthropic", 401, ANTHROPIC_BAD_KEY, "auth_invalid"),
        ("anthropic", 400, ANTHROPIC_NO_CREDIT, "quota_exceeded"),
        ("anthropic", 200, ANTHROPIC_OK, "ok"),
    ],
)
def test_the_check_says_what_the_providers_answer_means(
    api: TestClient,
    wire_stub: WireStub,
    provider: str,
    status: int,
    body: dict[str, Any],
    expected: str,
) -> None:
    base_url = wire_stub.url + ("/v1" if provider == "openai" else "")
    _connect(api, provider=provider, base_url=base_url, headers={"X-Check": "yes"})
    wire_stub.status, wire_stub.body = status, body
    checked = _check(api)
    assert checked["status"] == expected, checked
    assert checked["ok"] is (expected == "ok")
    assert checked["message"]
    # One minimal call, with the connection's key and headers.
    assert len(wire_stub.requests) == 1
    method, path, headers, sent = wire_stub.requests[0]
    assert headers["x-check"] == "yes"
    if provider == "openai":
        assert (method, path) == ("POST", "/v1/chat/completions")
        assert headers["authorization"] == f"Bearer {KEY}"
        assert json.loads(sent)["max_completion_tokens"] == 1
    else:
        assert (method, path) == ("POST", "/v1/messages")
        assert headers["x-api-key"] == KEY
        assert json.loads(sent)["max_tokens"] == 1


def test_the_check_of_a_working_openai_compatible_server_is_ok(
    api: TestClient, wire_stub: WireStub
) -> None:
    _connect(api, provider="openai_compatible", base_url=f"{wire_stub.url}/v1")
    wire_stub.body = {"object": "list", "data": [{"id": "llama-3-8b", "object": "model"}]}
    checked = _check(api)
    assert checked["status"] == "ok" and checked["ok"] is True
    assert wire_stub.requests[0][:2] == ("GET", "/v1/models")


def test_the_check_of_a_server_nobody_listens_on_is_unreachable(api: TestClient) -> None:
    _connect(api, provider="openai_compatible", base_url=f"http://127.0.0.1:{free_port()}/v1")
    checked = _check(api)
    assert checked["status"] == "unreachable" and checked["ok"] is False


def test_the_check_of_an_unknown_connection_is_a_404(api: TestClient) -> None:
    response = api.post("/v1/connections/nope/check")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "CONNECTION_NOT_FOUND"


def test_a_connection_at_its_budget_refuses_the_call_before_the_provider(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _connect(
        runs_api,
        name="c",
        provider="openai",
        base_url=f"{openai_stub.url}/v1",
        monthly_budget_usd=0.0000001,
    )
    create_prompt(runs_api)
    first = run(runs_api, variables={"name": "Ada"})
    assert first["usage"]["estimated_cost_usd"] > 0.0000001
    calls = len(openai_stub.calls)
    for body in ({"variables": {"name": "Ada"}}, {"variables": {"name": "Ada"}, "stream": True}):
        refused = runs_api.post("/v1/prompts/greet/run", json=body)
        assert refused.status_code == 402, refused.text
        error = refused.json()["error"]
        assert error["code"] == "BUDGET_EXCEEDED" and error["type"] == "budget_error"
        assert error["details"]["connection"] == "c"
        assert error["details"]["budget_usd"] == 0.0000001
        assert error["details"]["spent_usd"] == pytest.approx(first["usage"]["estimated_cost_usd"])
    assert len(openai_stub.calls) == calls  # nothing reached the provider
    shown = runs_api.get("/v1/connections/c").json()["data"]
    assert shown["spend_this_month_usd"] == pytest.approx(first["usage"]["estimated_cost_usd"])

    # Raising the budget lets calls through again.
    raised = runs_api.patch("/v1/connections/c", json={"monthly_budget_usd": 100})
    assert raised.status_code == 200
    run(runs_api, variables={"name": "Ada"})
    assert len(openai_stub.calls) == calls + 1


def test_a_zero_budget_refuses_every_call_and_the_spend_is_summed_from_the_log(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    _connect(runs_api, name="c", provider="openai", base_url=f"{openai_stub.url}/v1")
    create_prompt(runs_api)
    first = run(runs_api, variables={"name": "Ada"})
    # A fresh collector on the same store sums the month's spend from the log.
    services = runs_api.app.state.services  # type: ignore[attr-defined]
    services.connections.spend.forget("default", "c")
    shown = runs_api.get("/v1/connections/c").json()["data"]
    assert shown["spend_this_month_usd"] == pytest.approx(first["usage"]["estimated_cost_usd"])
    runs_api.patch("/v1/connections/c", json={"monthly_budget_usd": 0})
    calls = len(openai_stub.calls)
    refused = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})
    assert refused.status_code == 402
    assert len(openai_stub.calls) == calls


@pytest.mark.cost
def test_the_budget_check_does_not_sum_the_log_per_call(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    services = runs_api.app.state.services  # type: ignore[attr-defined]
    store = services.connections.spend._store
    sums: list[str] = []
    summed = store.spend

    def counted(project: str, name: str, since: Any) -> float:
        sums.append(name)
        return summed(project, name, since)

    store.spend = counted
    _connect(
        runs_api,
        name="c",
        provider="openai",
        base_url=f"{openai_stub.url}/v1",
        monthly_budget_usd=10,
    )
    create_prompt(runs_api)
    total = 0.0
    for _ in range(5):
        total += run(runs_api, variables={"name": "Ada"})["usage"]["estimated_cost_usd"]
    shown = runs_api.get("/v1/connections/c").json()["data"]
    assert shown["spend_this_month_usd"] == pytest.approx(total)
    assert sums == ["c"]  # summed once (when it was made), then counted up per call


def test_the_last_use_is_stored(runs_api: TestClient, openai_stub: OpenAIStub) -> None:
    _connect(runs_api, name="c", provider="openai", base_url=f"{openai_stub.url}/v1")
    assert runs_api.get("/v1/connections/c").json()["data"]["last_used_at"] is None
    create_prompt(runs_api)
    run(runs_api, variables={"name": "Ada"})
    services = runs_api.app.state.services  # type: ignore[attr-defined]
    services.pending.wait("default")
    services.connections._used.clear()  # what another collector of the store sees
    assert runs_api.get("/v1/connections/c").json()["data"]["last_used_at"] is not None
