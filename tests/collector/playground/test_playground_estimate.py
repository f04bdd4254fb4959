"""A playground run's estimate is made before anything is called: tiktoken counts an OpenAI
model's input, an approximation the others', output at max_tokens; above ``max_cost_usd`` the
run is a 402 and the provider sees nothing; a connection at its budget refuses its cells."""

from __future__ import annotations

import math

import pytest
import tiktoken
from fastapi.testclient import TestClient

from promptrail.collector.services.playground import estimate
from promptrail.collector.services.playground.estimate import TOKENIZERS
from promptrail.collector.services.pricing import GenaiPriceBook
from promptrail.testing import AnthropicStub, OpenAIStub
from tests.collector.playground.steps import PATH, play

TEXT = "Summarise the meeting notes for {team} in three short bullet points, please."
RENDERED = TEXT.replace("{team}", "the platform team")


@pytest.fixture(autouse=True, scope="module")
def encodings_loaded() -> None:
    """Load tiktoken's encodings before the runs: a run waits for them only so long."""
    assert TOKENIZERS.wait("o200k_base", 60) is not None
    assert TOKENIZERS.wait("cl100k_base", 60) is not None


def _openai_tokens(encoding: str, messages: list[tuple[str, str]]) -> int:
    """OpenAI's chat count: 3 a message plus its role and text, plus 3 priming the reply."""
    enc = tiktoken.get_encoding(encoding)
    return 3 + sum(3 + len(enc.encode(role)) + len(enc.encode(text)) for role, text in messages)


@pytest.mark.parametrize(
    ("model", "encoding"), [("gpt-4o-mini", "o200k_base"), ("gpt-4", "cl100k_base")]
)
def test_an_openai_models_input_is_counted_with_tiktoken_and_priced_with_the_logs_table(
    runs_api: TestClient, openai_stub: OpenAIStub, model: str, encoding: str
) -> None:
    data = play(
        runs_api,
        prompt={"template": TEXT, "model": model, "parameters": {"max_tokens": 50}},
        variables={"team": "the platform team"},
        repetitions=2,
    )
    tokens = _openai_tokens(encoding, [("user", RENDERED)])
    assert data["estimate_method"] == "tiktoken"
    assert data["estimated_input_tokens"] == 2 * tokens
    assert data["estimated_output_tokens"] == 2 * 50
    price = GenaiPriceBook().cost("openai", model, tokens, 50)
    assert price is not None
    assert data["estimated_cost_usd"] == pytest.approx(2 * price)


def test_a_chat_prompts_messages_are_counted_each_and_output_defaults_to_1024(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three colours of {{thing}}."},
    ]
    data = play(
        runs_api,
        prompt={"type": "chat", "messages": messages, "model": "gpt-4o-mini"},
        variables={"thing": "the sea"},
    )
    expected = _openai_tokens(
        "o200k_base", [("system", "You are terse."), ("user", "Name three colours of the sea.")]
    )
    assert data["estimated_input_tokens"] == expected
    assert data["estimated_output_tokens"] == 1024


def test_other_models_are_approximated_and_the_estimate_says_so(
    runs_api: TestClient, anthropic_stub: AnthropicStub
) -> None:
    data = play(
        runs_api,
        prompt={"template": TEXT, "model": "claude-3-5-haiku-latest"},
        variables={"team": "the platform team"},
    )
    assert data["estimate_method"] == "approximate"
    # A token per 4 characters, rounded up, 4 a message and 3 for the reply.
    assert data["estimated_input_tokens"] == math.ceil(len(RENDERED) / 4) + 4 + 3
    assert data["estimated_output_tokens"] == 1024


@pytest.mark.parametrize("stream", [False, True])
def test_a_run_estimated_above_its_max_cost_is_refused_and_nothing_is_called(
    runs_api: TestClient, openai_stub: OpenAIStub, stream: bool
) -> None:
    body = {
        "prompt": {"template": TEXT, "model": "gpt-4o", "parameters": {"max_tokens": 4000}},
        "variables": {"team": "the platform team"},
        "repetitions": 10,
        "max_cost_usd": 0.01,
        "stream": stream,
    }
    response = runs_api.post(PATH, json=body)
    assert response.status_code == 402, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "BUDGET_EXCEEDED" and error["type"] == "budget_error"
    assert error["details"]["estimated_usd"] > 0.01
    assert openai_stub.calls == []
    shown = runs_api.get("/v1/requests", params={"environment": "all"})
    assert shown.json()["data"] == []
    # Under the limit the same run goes ahead, its estimate the one refused before.
    allowed = play(runs_api, **{**body, "max_cost_usd": 1.0, "stream": False})
    assert allowed["estimated_cost_usd"] == error["details"]["estimated_usd"]
    assert len(openai_stub.calls) == 10


def test_a_connection_at_its_budget_refuses_its_cells_and_the_others_run(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    made = runs_api.post(
        "/v1/connections",
        json={
            "name": "capped",
            "provider": "openai",
            "api_key": "sk-capped-connection-01",
            "base_url": f"{openai_stub.url}/v1",
            "monthly_budget_usd": 0,
        },
    )
    assert made.status_code == 201, made.text
    data = play(
        runs_api,
        prompt={"template": TEXT, "model": "gpt-4o-mini"},
        variables={"team": "ops"},
        models=["gpt-4o-mini", "claude-3-5-haiku-latest"],
    )
    capped, other = data["cells"]
    assert capped["status"] == "error" and capped["request_id"] is None
    assert capped["error"]["code"] == "BUDGET_EXCEEDED"
    assert capped["error"]["details"]["connection"] == "capped"
    assert other["status"] == "success"
    assert openai_stub.calls == [] and len(anthropic_stub.calls) == 1


def test_without_tiktokens_files_the_estimate_is_approximate_and_the_run_goes_ahead(
    runs_api: TestClient, openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []

    def offline(name: str) -> tiktoken.Encoding:
        loads.append(name)
        raise ConnectionError("no route to the download server")

    monkeypatch.setattr(estimate.tiktoken, "get_encoding", offline)
    services = runs_api.app.state.services  # type: ignore[attr-defined]
    monkeypatch.setattr(services.playground, "_tokenizers", estimate.Tokenizers())
    for _ in range(2):
        data = play(
            runs_api,
            prompt={"template": TEXT, "model": "gpt-4o-mini"},
            variables={"team": "the platform team"},
        )
        assert data["estimate_method"] == "approximate"
        assert data["estimated_input_tokens"] == math.ceil(len(RENDERED) / 4) + 4 + 3
        assert data["cells"][0]["status"] == "success"
    # The failure is remembered: one attempt, not one a run.
    assert loads == ["o200k_base"]
