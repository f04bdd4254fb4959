"""Runs (spec 4.3, 6; docs/api-notes.md, "Runs"): a stored prompt run on the service side, whole or
streamed.

The providers are the wire-format stubs of ``promptrail.testing`` on real sockets; the collector
talks to them over HTTP exactly as it would to OpenAI and Anthropic.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import AnthropicStub, OpenAIStub, StubProvider
from tests.collector.contract import assert_error
from tests.collector.runs.steps import create_prompt, run, stream
from tests.keys import ANTHROPIC_KEY, DEFAULT_AUTH, OPENAI_KEY

KEY_HEADER = DEFAULT_AUTH
REPLY = "Hello Ada, nice to meet you today."
PIECES = ["Hello ", "Ada, ", "nice ", "to ", "meet ", "you ", "today."]


def record(api: TestClient, request_id: str) -> dict[str, Any]:
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def messages_sent(stub: StubProvider, index: int = -1) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = stub.calls[index].body["messages"]
    return sent


@pytest.fixture(autouse=True)
def _reply(openai_stub: OpenAIStub, anthropic_stub: AnthropicStub) -> None:
    openai_stub.script.reply = REPLY
    anthropic_stub.script.reply = REPLY


# -- whole runs ------------------------------------------------------------------------------


def test_run_returns_the_result_and_stores_it_as_a_record(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, parameters={"temperature": 0.2, "max_tokens": 100, "seed": 7})
    metadata = {"user_id": "u1", "session_id": "s9", "environment": "test"}

    result = run(runs_api, variables={"name": "Ada"}, metadata=metadata)

    assert result["id"].startswith("req_")
    assert result["output"] == REPLY
    assert (result["prompt_name"], result["version"], result["model"]) == (
        "greet",
        1,
        "gpt-4o-mini",
    )
    assert result["metadata"] == metadata
    usage = result["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (4, 7, 11)
    assert usage["estimated_cost_usd"] > 0
    assert isinstance(result["latency_ms"], int)
    assert result["created_at"].endswith(("Z", "+00:00"))
    # What went upstream: the provider's model name, the rendered message, every parameter.
    call = openai_stub.calls[0]
    assert call.path == "/v1/chat/completions"
    assert call.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert call.body["model"] == "gpt-4o-mini"
    assert call.body["messages"] == [{"role": "user", "content": "Say hello to Ada."}]
    assert (call.body["temperature"], call.body["max_tokens"], call.body["seed"]) == (0.2, 100, 7)
    assert "stream" not in call.body
    # The record is readable at once, and carries everything the run did.
    stored = record(runs_api, result["id"])
    assert stored["status"] == "success"
    assert (stored["prompt_name"], stored["version"]) == ("greet", 1)
    assert stored["model"] == "gpt-4o-mini"
    assert stored["provider"] == "openai"
    assert stored["input_variables"] == {"name": "Ada"}
    assert stored["input"] == [{"role": "user", "content": "Say hello to Ada."}]
    assert stored["output"] == {"content": REPLY, "finish_reason": "stop"}
    assert stored["metadata"] == metadata
    assert stored["usage"] == usage
    assert stored["cost_known"] is True
    assert stored["created_at"] == result["created_at"]
    assert stored["timing"]["total_latency_ms"] == result["latency_ms"]
    assert set(stored["timing"]) == {
        "total_latency_ms",
        "pre_process_ms",
        "llm_call_ms",
        "post_process_ms",
    }
    assert stored["integration"] == {
        "pre_process_executed": True,
        "post_process_executed": True,
        "errors": [],
    }
    assert stored["error"] is None


def test_run_addresses_the_latest_version_a_number_or_a_label(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, labels=["production"])
    patched = runs_api.patch("/v1/prompts/greet", json={"template": "Greet {name} warmly."})
    assert patched.status_code == 200, patched.text

    paths = {
        "/v1/prompts/greet/run": (2, "Greet Ada warmly."),
        "/v1/prompts/greet/versions/1/run": (1, "Say hello to Ada."),
        "/v1/prompts/greet/versions/2/run": (2, "Greet Ada warmly."),
        "/v1/prompts/greet/versions/by-label/production/run": (1, "Say hello to Ada."),
        "/v1/prompts/greet/versions/by-label/latest/run": (2, "Greet Ada warmly."),
        "/api/v1/prompts/greet/run": (2, "Greet Ada warmly."),
    }
    for path, (version, text) in paths.items():
        result = run(runs_api, path, variables={"name": "Ada"})
        assert result["version"] == version, path
        assert messages_sent(openai_stub) == [{"role": "user", "content": text}], path


def test_run_by_prompt_id(runs_api: TestClient) -> None:
    prompt = create_prompt(runs_api)

    result = run(runs_api, f"/v1/prompts/{prompt['id']}/run", variables={"name": "Ada"})

    assert result["prompt_name"] == "greet"


def test_a_prompt_without_variables_runs_without_a_body(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, template="Tell a short joke.")

    response = runs_api.post("/v1/prompts/greet/run")

    assert response.status_code == 200, response.text
    assert response.json()["data"]["metadata"] == {}
    assert messages_sent(openai_stub) == [{"role": "user", "content": "Tell a short joke."}]


@pytest.mark.parametrize("field", ["variables", "input_variables"])
def test_either_variables_field_fills_the_template(
    runs_api: TestClient, openai_stub: OpenAIStub, field: str
) -> None:
    create_prompt(runs_api, template="Write a {tone} note to {name}.")

    body: dict[str, Any] = {field: {"tone": "kind", "name": "Ada"}}
    result = run(runs_api, **body)

    assert messages_sent(openai_stub) == [{"role": "user", "content": "Write a kind note to Ada."}]
    assert record(runs_api, result["id"])["input_variables"] == {"tone": "kind", "name": "Ada"}


def test_non_string_variables_render_as_json(runs_api: TestClient, openai_stub: OpenAIStub) -> None:
    create_prompt(runs_api, template="Items: {items}; count: {count}.")

    run(runs_api, variables={"items": ["a", "b"], "count": 2})

    assert messages_sent(openai_stub)[0]["content"] == 'Items: ["a", "b"]; count: 2.'


def test_user_input_fills_the_template_when_it_uses_it(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, template="Answer for {name}: {user_input}")

    result = run(runs_api, variables={"name": "Ada"}, user_input="What is 2+2?")

    assert messages_sent(openai_stub) == [
        {"role": "user", "content": "Answer for Ada: What is 2+2?"}
    ]
    assert record(runs_api, result["id"])["input_variables"] == {
        "name": "Ada",
        "user_input": "What is 2+2?",
    }


def test_user_input_follows_a_template_that_does_not_use_it_as_system_then_user(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, template="You are a {persona}.")

    result = run(runs_api, variables={"persona": "pirate"}, user_input="Where is the gold?")

    expected = [
        {"role": "system", "content": "You are a pirate."},
        {"role": "user", "content": "Where is the gold?"},
    ]
    assert messages_sent(openai_stub) == expected
    assert record(runs_api, result["id"])["input"] == expected


def test_literal_braces_reach_the_model_as_single_braces(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, template='Reply as JSON {{"greeting": "..."}} for {name}.')

    run(runs_api, variables={"name": "Ada"})

    assert messages_sent(openai_stub)[0]["content"] == 'Reply as JSON {"greeting": "..."} for Ada.'


def test_anthropic_run_speaks_the_messages_api(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    create_prompt(
        runs_api,
        name="pirate",
        template="You are a {persona}.",
        model="anthropic/claude-haiku-4-5",
        parameters={"temperature": 0.5},
    )

    result = run(
        runs_api,
        "/v1/prompts/pirate/run",
        variables={"persona": "pirate"},
        user_input="Where is the gold?",
    )

    call = anthropic_stub.calls[0]
    assert call.path == "/v1/messages"
    assert call.headers["x-api-key"] == ANTHROPIC_KEY
    assert call.headers["anthropic-version"] == "2023-06-01"
    assert call.body["model"] == "claude-haiku-4-5"
    assert call.body["system"] == "You are a pirate."
    assert call.body["messages"] == [{"role": "user", "content": "Where is the gold?"}]
    assert (call.body["max_tokens"], call.body["temperature"]) == (1024, 0.5)
    assert result["output"] == REPLY
    assert result["model"] == "claude-haiku-4-5"
    assert result["usage"]["prompt_tokens"] == 8  # the stub counts system and user words
    assert result["usage"]["completion_tokens"] == 7
    assert result["usage"]["estimated_cost_usd"] > 0
    stored = record(runs_api, result["id"])
    assert (stored["provider"], stored["output"]["finish_reason"]) == ("anthropic", "end_turn")


# -- errors found before anything is sent -----------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_missing_variables_are_invalid_template_and_nothing_is_sent(
    runs_api: TestClient, openai_stub: OpenAIStub, streamed: bool
) -> None:
    template = "Write to {name} in {city} about {topic}."
    create_prompt(runs_api, template=template)

    response = runs_api.post(
        "/v1/prompts/greet/run", json={"variables": {"topic": "tea"}, "stream": streamed}
    )

    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("INVALID_TEMPLATE", "validation_error")
    assert error["details"]["missing_variables"] == ["city", "name"]
    assert error["details"]["template"] == template
    assert openai_stub.calls == []


def test_a_template_that_uses_user_input_needs_it(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, template="Answer: {user_input}")

    response = runs_api.post("/v1/prompts/greet/run", json={})

    assert response.status_code == 400
    assert response.json()["error"]["details"]["missing_variables"] == ["user_input"]
    assert openai_stub.calls == []


def test_unknown_model_is_a_validation_error_naming_it(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    create_prompt(runs_api, model="mistral-large")

    response = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["field"] == "model"
    assert error["details"]["model"] == "mistral-large"
    assert "mistral-large" in error["message"]
    assert openai_stub.calls == anthropic_stub.calls == []


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v1/prompts/nope/run", "PROMPT_NOT_FOUND"),
        ("/v1/prompts/greet/versions/9/run", "VERSION_NOT_FOUND"),
        ("/v1/prompts/greet/versions/by-label/staging/run", "LABEL_NOT_FOUND"),
    ],
)
def test_unknown_prompt_version_or_label_is_404(
    runs_api: TestClient, openai_stub: OpenAIStub, path: str, code: str
) -> None:
    create_prompt(runs_api)

    response = runs_api.post(path, json={"variables": {"name": "Ada"}, "stream": True})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == code
    assert openai_stub.calls == []


def test_a_deleted_prompt_cannot_run(runs_api: TestClient, openai_stub: OpenAIStub) -> None:
    create_prompt(runs_api)
    assert runs_api.delete("/v1/prompts/greet").status_code == 200

    response = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})

    assert response.status_code == 404
    error = response.json()["error"]
    assert (error["code"], error["details"]["prompt_name"]) == ("PROMPT_NOT_FOUND", "greet")
    assert openai_stub.calls == []


def test_malformed_run_bodies_are_validation_errors(runs_api: TestClient) -> None:
    create_prompt(runs_api)

    for body, field in [
        ({"variables": ["Ada"]}, "variables"),
        ({"metadata": "x"}, "metadata"),
        ({"stream": "sometimes"}, "stream"),
        ({"varibles": {"name": "Ada"}}, "varibles"),
    ]:
        response = runs_api.post("/v1/prompts/greet/run", json=body)
        assert response.status_code == 400, body
        assert response.json()["error"]["details"]["field"] == field


@pytest.mark.parametrize(
    "metadata",
    [{f"k{i}": i for i in range(101)}, {"": "empty key"}, {"k" * 129: "long key"}],
    ids=["101-keys", "empty-key", "129-character-key"],
)
def test_metadata_over_its_limits_is_refused_on_a_run_as_on_a_logged_record(
    runs_api: TestClient, openai_stub: OpenAIStub, metadata: dict[str, Any]
) -> None:
    # A run is stored as a record: its metadata has the record's limits (100 keys, 1-128
    # characters each), and a refused run calls no provider.
    create_prompt(runs_api)

    ran = runs_api.post("/v1/prompts/greet/run", json={"metadata": metadata})
    logged = runs_api.post("/v1/requests", json={"metadata": metadata})

    assert_error(ran, 400, "VALIDATION_ERROR", "metadata")
    assert_error(logged, 400, "VALIDATION_ERROR", "metadata")
    assert openai_stub.calls == []


def test_runs_need_an_api_key(runs_api: TestClient) -> None:
    create_prompt(runs_api)

    response = runs_api.post(
        "/v1/prompts/greet/run", json={}, headers={"Authorization": "Bearer pr-wrong"}
    )

    assert response.status_code == 401


# -- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-haiku-4-5"])
def test_stream_relays_the_same_answer_and_usage_as_a_whole_run(
    runs_api: TestClient, model: str
) -> None:
    create_prompt(runs_api, model=model)
    whole = run(runs_api, variables={"name": "Ada"})

    events = stream(runs_api, variables={"name": "Ada"}, metadata={"trace": "t1"})

    assert events[0]["type"] == "start"
    assert events[0]["request_id"].startswith("req_")
    assert events[0]["request_id"] != whole["id"]
    chunks = [e for e in events[1:-1]]
    assert all(e["type"] == "chunk" for e in chunks)
    assert [e["content"] for e in chunks] == PIECES  # one event per provider piece
    assert "".join(e["content"] for e in chunks) == whole["output"]
    assert events[-1] == {"type": "end", "usage": whole["usage"], "cost_known": whole["cost_known"]}
    stored = record(runs_api, events[0]["request_id"])
    assert stored["status"] == "success"
    assert stored["output"]["content"] == whole["output"]
    assert stored["usage"] == whole["usage"]
    assert stored["metadata"] == {"trace": "t1"}
    assert stored["time_to_first_token_ms"] is not None


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-haiku-4-5"])
def test_streamed_runs_one_after_another_reuse_one_connection_to_the_provider(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub, model: str
) -> None:
    # A stream closed with its body unread closes its connection: each run would then pay a
    # new connect (and a TLS handshake with a real provider).
    create_prompt(runs_api, model=model)
    stub = openai_stub if model.startswith("gpt") else anthropic_stub

    for _ in range(3):
        assert stream(runs_api, variables={"name": "Ada"})[-1]["type"] == "end"

    ports = [call.client_port for call in stub.calls]
    assert len(ports) == 3 and ports[0] is not None
    assert len(set(ports)) == 1, ports


def test_openai_streams_ask_for_usage(runs_api: TestClient, openai_stub: OpenAIStub) -> None:
    create_prompt(runs_api)

    stream(runs_api, variables={"name": "Ada"})

    body = openai_stub.calls[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_chunks_reach_the_client_as_the_provider_sends_them(
    runs_url: str, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.chunk_delay = 0.15
    with httpx.Client(base_url=runs_url, headers=KEY_HEADER, timeout=30) as client:
        create_prompt(client)
        arrivals: list[tuple[float, dict[str, Any]]] = []
        with client.stream(
            "POST", "/v1/prompts/greet/run", json={"variables": {"name": "Ada"}, "stream": True}
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrivals.append((time.monotonic(), json.loads(line.removeprefix("data: "))))

    chunk_times = [at for at, event in arrivals if event["type"] == "chunk"]
    assert len(chunk_times) == len(PIECES)
    # Seven pieces 0.15 s apart: relayed one by one, they arrive spread over about a second;
    # buffered into one, they would arrive together.
    assert chunk_times[-1] - chunk_times[0] > 0.5
    assert arrivals[-1][1]["type"] == "end"


def test_a_client_that_disconnects_stops_the_upstream_call(
    runs_url: str, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = " ".join(f"word{i}" for i in range(40))
    openai_stub.script.chunk_delay = 0.1
    with httpx.Client(base_url=runs_url, headers=KEY_HEADER, timeout=30) as client:
        create_prompt(client)
        with client.stream(
            "POST", "/v1/prompts/greet/run", json={"variables": {"name": "Ada"}, "stream": True}
        ) as response:
            lines = response.iter_lines()
            start = json.loads(next(line for line in lines if line).removeprefix("data: "))
            first = json.loads(next(line for line in lines if line).removeprefix("data: "))
        # Leaving the block closed the connection after the first chunk.

        assert first["type"] == "chunk"
        assert openai_stub.streams_cancelled.wait(timeout=10), "upstream stream kept running"
        assert openai_stub.streams_completed == 0
        stored = wait_for_record(client, start["request_id"])

    assert stored["status"] == "error"
    assert "disconnected" in stored["error"]
    assert stored["output"]["content"].startswith("word0")


def wait_for_record(client: httpx.Client, request_id: str) -> dict[str, Any]:
    """The record of a disconnected stream is stored after the client left: poll briefly."""
    deadline = time.monotonic() + 10
    while True:
        response = client.get(f"/v1/requests/{request_id}")
        if response.status_code == 200 or time.monotonic() > deadline:
            assert response.status_code == 200, response.text
            data: dict[str, Any] = response.json()["data"]
            return data
        time.sleep(0.05)


# -- provider failures ----------------------------------------------------------------------


def test_provider_500_is_retried_then_answered_502_with_the_error_record(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    openai_stub.script.failures = [500, 500, 500]

    response = runs_api.post(
        "/v1/prompts/greet/run", json={"variables": {"name": "Ada"}, "metadata": {"k": "v"}}
    )

    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("PROVIDER_ERROR", "provider_error")
    assert "500" in error["message"]
    assert error["details"]["provider"] == "openai"
    assert error["details"]["provider_status"] == 500
    assert len(openai_stub.calls) == 3  # the first try and two retries
    stored = record(runs_api, error["details"]["request_id"])
    assert stored["status"] == "error"
    assert "stub failed this request with 500" in stored["error"]
    assert stored["metadata"] == {"k": "v"}
    assert stored["input"] == [{"role": "user", "content": "Say hello to Ada."}]


def test_a_rate_limit_then_success_is_retried(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    create_prompt(runs_api, model="claude-haiku-4-5")
    anthropic_stub.script.failures = [429]
    anthropic_stub.script.retry_after = "0"

    result = run(runs_api, variables={"name": "Ada"})

    assert result["output"] == REPLY
    assert len(anthropic_stub.calls) == 2


def test_client_errors_of_the_provider_are_not_retried(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    openai_stub.script.failures = [401]

    response = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})

    assert response.status_code == 502
    assert response.json()["error"]["details"]["provider_status"] == 401
    assert len(openai_stub.calls) == 1


def test_a_provider_slower_than_the_read_timeout_is_a_provider_error(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    openai_stub.script.first_byte_delay = 5

    started = time.monotonic()
    response = runs_api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})
    waited = time.monotonic() - started

    assert response.status_code == 502
    error = response.json()["error"]
    assert "timed out" in error["message"]
    assert waited < 4.5  # the read timeout (1.5 s), not the provider's 5 s
    assert len(openai_stub.calls) == 1  # the provider may still be working: no retry
    assert record(runs_api, error["details"]["request_id"])["status"] == "error"


def test_an_unreachable_provider_is_a_provider_error(run_settings: Settings) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    settings = run_settings.model_copy(
        update={"openai_base_url": f"http://127.0.0.1:{closed_port}/v1"}
    )
    with TestClient(create_app(settings), headers=KEY_HEADER) as api:
        create_prompt(api)

        response = api.post("/v1/prompts/greet/run", json={"variables": {"name": "Ada"}})

    assert response.status_code == 502
    assert "cannot reach the provider" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("model", "break_with"),
    [
        ("gpt-4o-mini", "drop"),
        ("gpt-4o-mini", "error_event"),
        ("claude-haiku-4-5", "drop"),
        ("claude-haiku-4-5", "error_event"),
    ],
)
def test_a_failure_mid_stream_sends_an_error_event_and_stores_an_error_record(
    runs_api: TestClient,
    openai_stub: OpenAIStub,
    anthropic_stub: AnthropicStub,
    model: str,
    break_with: str,
) -> None:
    create_prompt(runs_api, model=model)
    for stub in (openai_stub, anthropic_stub):
        stub.script.break_after_chunks = 2
        stub.script.break_with = break_with  # type: ignore[assignment]

    events = stream(runs_api, variables={"name": "Ada"})

    assert [e["type"] for e in events] == ["start", "chunk", "chunk", "error"]
    error = events[-1]["error"]
    assert (error["type"], error["code"]) == ("provider_error", "PROVIDER_ERROR")
    assert error["message"]
    assert error["details"]["request_id"] == events[0]["request_id"]
    stored = record(runs_api, events[0]["request_id"])
    assert stored["status"] == "error"
    assert stored["error"] == error["message"]
    assert stored["output"]["content"] == "Hello Ada, "


def test_a_stream_whose_provider_fails_before_the_first_byte_reports_it_in_the_stream(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    openai_stub.script.failures = [503, 503, 503]

    events = stream(runs_api, variables={"name": "Ada"})

    assert [e["type"] for e in events] == ["start", "error"]
    assert events[1]["error"]["details"]["provider_status"] == 503
    assert record(runs_api, events[0]["request_id"])["status"] == "error"


# -- cost ----------------------------------------------------------------------------------


def test_a_model_without_a_known_price_costs_zero_and_says_so(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api, model="openai/my-local-model")

    result = run(runs_api, variables={"name": "Ada"})

    assert openai_stub.calls[0].body["model"] == "my-local-model"
    assert result["model"] == "my-local-model"
    assert result["usage"]["total_tokens"] == 11
    assert result["usage"]["estimated_cost_usd"] == 0
    stored = record(runs_api, result["id"])
    assert stored["cost_known"] is False
    assert stored["usage"]["estimated_cost_usd"] == 0


def test_the_cost_follows_the_models_price(runs_api: TestClient) -> None:
    create_prompt(runs_api, name="small", model="gpt-4o-mini")
    create_prompt(runs_api, name="large", model="gpt-4o")

    small = run(runs_api, "/v1/prompts/small/run", variables={"name": "Ada"})
    large = run(runs_api, "/v1/prompts/large/run", variables={"name": "Ada"})

    assert small["usage"]["total_tokens"] == large["usage"]["total_tokens"]
    assert 0 < small["usage"]["estimated_cost_usd"] < large["usage"]["estimated_cost_usd"]


def test_run_records_show_up_in_the_log_and_its_analytics(runs_api: TestClient) -> None:
    create_prompt(runs_api)
    first = run(runs_api, variables={"name": "Ada"}, metadata={"user_id": "u7"})
    run(runs_api, variables={"name": "Bob"}, metadata={"user_id": "u8"})

    listed = runs_api.get("/v1/requests", params={"metadata.user_id": "u7"}).json()["data"]

    assert [r["id"] for r in listed] == [first["id"]]
    assert listed[0]["input_variables"] == {"name": "Ada"}
    cost = runs_api.get("/v1/requests/analytics", params={"metric": "cost"}).json()["data"]
    assert cost["total"] > 0


def test_no_request_can_choose_where_a_run_is_sent(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    # The provider URLs are the operator's settings: neither a run nor a prompt can name one
    # (docs/security.md, "SSRF through provider base URLs").
    openai_stub.reset()
    create_prompt(runs_api)
    for field in ("base_url", "api_base", "url"):
        refused = runs_api.post(
            "/v1/prompts/greet/run",
            json={"variables": {"name": "Ada"}, field: "http://169.254.169.254/latest"},
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "VALIDATION_ERROR"
    assert openai_stub.calls == []

    # A prompt's parameters travel in the provider's request body, never into its address:
    # the run still goes to the configured provider, and only there.
    made = runs_api.patch(
        "/v1/prompts/greet", json={"parameters": {"base_url": "http://169.254.169.254/"}}
    )
    assert made.status_code == 200, made.text
    run(runs_api, variables={"name": "Ada"})
    assert [call.path for call in openai_stub.calls] == ["/v1/chat/completions"]
