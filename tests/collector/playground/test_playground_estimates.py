"""``POST /v1/playground/estimates`` answers, for a run's body, the estimate that run would make
and each cell's, before anything is called: the numbers equal the run's, the provider sees no
call, no record is written, a bad body is a 400 and another project's prompt a 404."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.services.playground.estimate import TOKENIZERS
from promptrail.testing import AnthropicStub, OpenAIStub
from tests.collector.playground.steps import play, prompt_versions
from tests.collector.runs.steps import create_prompt

ESTIMATES = "/v1/playground/estimates"
TEXT = "Summarise the notes for {team} in three short bullet points."


@pytest.fixture(autouse=True, scope="module")
def encodings_loaded() -> None:
    """Load tiktoken's encodings first: a plan waits for them only so long, and an estimate
    made without them would be approximate where the run's is not."""
    assert TOKENIZERS.wait("o200k_base", 60) is not None


def estimate(api: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    """Estimate a run of ``body``; the estimate's data."""
    response = api.post(ESTIMATES, json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def _nothing_logged(api: TestClient) -> None:
    shown = api.get("/v1/requests", params={"environment": "all"})
    assert shown.status_code == 200, shown.text
    assert shown.json()["data"] == []


def test_the_estimate_is_the_runs_own_and_calls_nothing(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    body = {
        "prompt": {"template": TEXT, "model": "gpt-4o-mini", "parameters": {"max_tokens": 60}},
        "variables": {"team": "the platform team"},
        "models": ["gpt-4o-mini", "claude-3-5-haiku-latest"],
        "repetitions": 2,
        "stream": True,
    }
    data = estimate(runs_api, body)
    assert openai_stub.calls == [] and anthropic_stub.calls == []
    _nothing_logged(runs_api)
    assert [(c["cell"], c["model"], c["repetition"]) for c in data["cells"]] == [
        (0, "gpt-4o-mini", 1),
        (1, "gpt-4o-mini", 2),
        (2, "claude-3-5-haiku-latest", 1),
        (3, "claude-3-5-haiku-latest", 2),
    ]
    assert all("item_id" not in c for c in data["cells"])
    # Each cell priced alike for each repetition; the cells sum to the run's estimate.
    costs = [c["estimated_cost_usd"] for c in data["cells"]]
    assert costs[0] == costs[1] > 0 and costs[2] == costs[3] > 0
    assert data["estimated_cost_usd"] == pytest.approx(sum(costs))
    # An OpenAI model counted by tiktoken, Anthropic's approximated: approximate overall.
    assert data["estimate_method"] == "approximate"
    assert data["estimated_output_tokens"] == 4 * 60

    ran = play(runs_api, **{**body, "stream": False})
    for key in (
        "estimated_cost_usd",
        "estimated_input_tokens",
        "estimated_output_tokens",
        "estimate_method",
    ):
        assert data[key] == ran[key], key
    assert [c["cell"] for c in ran["cells"]] == [c["cell"] for c in data["cells"]]
    assert len(openai_stub.calls) == 2 and len(anthropic_stub.calls) == 2


def test_a_datasets_cells_are_estimated_per_item_and_a_cell_that_cannot_run_costs_nothing(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    assert runs_api.post("/v1/datasets", json={"name": "teams"}).status_code == 201
    items = [
        {"input_variables": {"team": "ops"}},
        {"input_variables": {"other": "no team here"}},
        {"input_variables": {"team": "the research and development group"}},
    ]
    made = runs_api.post("/v1/datasets/teams/items", json={"items": items})
    assert made.status_code in (200, 201), made.text
    body = {
        "prompt": {"template": TEXT, "model": "gpt-4o-mini"},
        "dataset": {"name": "teams", "limit": 3},
    }
    data = estimate(runs_api, body)
    cells = data["cells"]
    assert len(cells) == 3 and len({c["item_id"] for c in cells}) == 3
    short, cannot, long = (c["estimated_cost_usd"] for c in cells)
    assert cannot == 0 and 0 < short < long
    assert data["estimate_method"] == "tiktoken"
    assert data["estimated_output_tokens"] == 2 * 1024
    assert openai_stub.calls == []
    _nothing_logged(runs_api)

    ran = play(runs_api, **body)
    assert [c["item_id"] for c in ran["cells"]] == [c["item_id"] for c in cells]
    assert ran["estimated_cost_usd"] == data["estimated_cost_usd"]
    assert ran["estimated_input_tokens"] == data["estimated_input_tokens"]


def test_max_cost_is_left_to_the_caller_and_nothing_is_saved(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    body = {
        "prompt": {"name": "greet", "overrides": {"parameters": {"max_tokens": 4000}}},
        "variables": {"name": "Ada"},
        "repetitions": 10,
        "max_cost_usd": 0.000001,
    }
    data = estimate(runs_api, body)
    assert data["estimated_cost_usd"] > body["max_cost_usd"]
    refused = runs_api.post("/v1/playground/runs", json=body)
    assert refused.status_code == 402, refused.text
    assert refused.json()["error"]["details"]["estimated_usd"] == data["estimated_cost_usd"]
    assert openai_stub.calls == []
    _nothing_logged(runs_api)
    assert prompt_versions(runs_api, "greet") == [1]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"prompt": {"template": "Hi {name}."}}, "prompt"),
        ({"prompt": {"template": "Hi {name}.", "model": "gpt-4o-mini"}, "repetitions": 11}, None),
        (
            {
                "prompt": {"template": "Hi {name}.", "model": "gpt-4o-mini"},
                "variables": {"name": "Ada"},
                "dataset": {"name": "people"},
            },
            None,
        ),
        ({"prompt": {"template": "Hi {name}.", "model": "nobody-knows-me"}}, "models"),
        ({"prompt": {"template": "Hi {name}.", "model": "gpt-4o-mini"}, "surprise": 1}, None),
    ],
)
def test_a_bad_body_is_a_400_with_the_contracts_error(
    runs_api: TestClient, openai_stub: OpenAIStub, body: dict[str, Any], field: str | None
) -> None:
    response = runs_api.post(ESTIMATES, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "code", "details"}
    assert error["code"] == "VALIDATION_ERROR"
    if field is not None:
        assert field in response.text
    assert openai_stub.calls == []


def test_missing_variables_are_the_runs_invalid_template(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    response = runs_api.post(
        ESTIMATES, json={"prompt": {"template": TEXT, "model": "gpt-4o-mini"}, "variables": {}}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "INVALID_TEMPLATE"
    assert response.json()["error"]["details"]["missing_variables"] == ["team"]


def test_another_projects_stored_prompt_is_not_found(
    runs_api: TestClient, other_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    response = other_api.post(
        ESTIMATES, json={"prompt": {"name": "greet"}, "variables": {"name": "Ada"}}
    )
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "PROMPT_NOT_FOUND"
    # Its own project's key estimates it.
    assert estimate(runs_api, {"prompt": {"name": "greet"}, "variables": {"name": "Ada"}})
    assert openai_stub.calls == []
