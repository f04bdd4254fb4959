"""Playground runs: every cell (input x model x repetition) is answered and logged in the
``promptrail-playground`` environment, tagged with the run; nothing reaches the registry."""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.testing import AnthropicStub, OpenAIStub, Replies
from tests.collector.playground.steps import PATH, play, prompt_versions, record
from tests.collector.runs.steps import create_prompt

INLINE = {"template": "Say hello to {name}.", "model": "gpt-4o-mini"}


def test_a_matrix_of_inputs_models_and_repetitions_is_answered_and_logged(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    openai_stub.script.replies = Replies()
    anthropic_stub.script.replies = Replies()
    runs = []
    for name in ("Ada", "Grace"):
        runs.append(
            play(
                runs_api,
                prompt=INLINE,
                variables={"name": name},
                models=["gpt-4o-mini", "claude-3-5-haiku-latest"],
                repetitions=2,
            )
        )
    for name, data in zip(("Ada", "Grace"), runs, strict=True):
        assert data["id"].startswith("pg_") and len(data["id"]) == 35
        cells = data["cells"]
        assert [(c["cell"], c["model"], c["repetition"]) for c in cells] == [
            (0, "gpt-4o-mini", 1),
            (1, "gpt-4o-mini", 2),
            (2, "claude-3-5-haiku-latest", 1),
            (3, "claude-3-5-haiku-latest", 2),
        ]
        for cell in cells:
            assert cell["status"] == "success", cell
            assert cell["output"] == f"Echo: Say hello to {name}."
            assert cell["usage"]["total_tokens"] > 0
            assert cell["time_to_first_token_ms"] is not None
            assert cell["latency_ms"] >= cell["time_to_first_token_ms"]
            assert cell["cost_known"] is True and cell["estimated_cost_usd"] > 0
            assert "error" not in cell and "item_id" not in cell
            detail = record(runs_api, cell["request_id"])
            assert detail["environment"] == "promptrail-playground"
            assert detail["model"] == cell["model"]
            assert detail["metadata"]["source"] == "playground"
            assert detail["metadata"]["playground_run_id"] == data["id"]
            assert detail["metadata"]["repetition"] == cell["repetition"]
            assert detail["usage"]["estimated_cost_usd"] == cell["estimated_cost_usd"]
        assert data["cost_usd"] == round(sum(c["estimated_cost_usd"] for c in cells), 10)
    assert len(openai_stub.calls) == 4 and len(anthropic_stub.calls) == 4
    # The playground's records stay out of the production views.
    listed = runs_api.get("/v1/requests").json()["data"]
    assert listed == []
    shown = runs_api.get("/v1/requests", params={"environment": "promptrail-playground"})
    assert len(shown.json()["data"]) == 8
    # A run's records, found by its id.
    params = {"environment": "promptrail-playground", "metadata.playground_run_id": runs[0]["id"]}
    found = runs_api.get("/v1/requests", params=params).json()["data"]
    assert sorted(r["id"] for r in found) == sorted(c["request_id"] for c in runs[0]["cells"])


def test_a_stored_version_runs_with_overrides_and_the_registry_is_untouched(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.replies = Replies()
    create_prompt(runs_api)
    runs_api.patch("/v1/prompts/greet", json={"template": "Greet {name} warmly."})
    runs_api.put("/v1/prompts/greet/labels/production", json={"version": 1})
    data = play(
        runs_api,
        prompt={
            "name": "greet",
            "label": "production",
            "overrides": {"template": "Wave at {name}.", "parameters": {"max_tokens": 7}},
        },
        variables={"name": "Ada"},
    )
    (cell,) = data["cells"]
    assert cell["output"] == "Echo: Wave at Ada." and cell["model"] == "gpt-4o-mini"
    sent = openai_stub.calls[-1].body
    assert sent["max_tokens"] == 7 and "temperature" not in sent
    detail = record(runs_api, cell["request_id"])
    # An overridden version is no stored version: the record says which one it started from.
    assert detail["prompt_name"] == "greet" and detail["version"] is None
    assert detail["metadata"]["base_version"] == 1
    plain = play(runs_api, prompt={"name": "greet", "version": 2}, variables={"name": "Bo"})
    assert plain["cells"][0]["output"] == "Echo: Greet Bo warmly."
    assert record(runs_api, plain["cells"][0]["request_id"])["version"] == 2
    assert prompt_versions(runs_api, "greet") == [2, 1]


def test_dataset_items_run_in_item_order_up_to_the_limit_and_a_bad_item_fails_alone(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.replies = Replies()
    runs_api.post("/v1/datasets", json={"name": "people"})
    items = [
        {"id": "i1", "input_variables": {"name": "Ada"}},
        {"id": "i2", "input_variables": {"who": "nobody"}},
        {"id": "i3", "input_variables": {"name": "Grace"}},
        {"id": "i4", "input_variables": {"name": "Linus"}},
    ]
    added = runs_api.post("/v1/datasets/people/items", json={"items": items})
    assert added.status_code in (200, 201), added.text
    data = play(runs_api, prompt=INLINE, dataset={"name": "people", "limit": 3})
    cells = data["cells"]
    assert [c["item_id"] for c in cells] == ["i1", "i2", "i3"]
    assert cells[0]["output"] == "Echo: Say hello to Ada."
    assert cells[2]["output"] == "Echo: Say hello to Grace."
    bad = cells[1]
    assert bad["status"] == "error" and bad["request_id"] is None
    assert bad["error"]["code"] == "INVALID_TEMPLATE"
    assert bad["error"]["details"]["missing_variables"] == ["name"]
    assert len(openai_stub.calls) == 2
    assert record(runs_api, cells[0]["request_id"])["metadata"]["dataset_item_id"] == "i1"


def test_a_failing_cell_does_not_stop_the_others(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    anthropic_stub.script.failures = [400, 400]
    data = play(
        runs_api,
        prompt=INLINE,
        variables={"name": "Ada"},
        models=["gpt-4o-mini", "claude-3-5-haiku-latest"],
        repetitions=2,
    )
    good = [c for c in data["cells"] if c["model"] == "gpt-4o-mini"]
    bad = [c for c in data["cells"] if c["model"] != "gpt-4o-mini"]
    assert [c["status"] for c in good] == ["success", "success"]
    assert [c["status"] for c in bad] == ["error", "error"]
    for cell in bad:
        assert cell["error"]["code"] == "PROVIDER_ERROR"
        assert cell["error"]["details"]["request_id"] == cell["request_id"]
        assert record(runs_api, cell["request_id"])["status"] == "error"
    assert data["cost_usd"] == round(sum(c["estimated_cost_usd"] for c in good), 10)


def test_a_stored_prompt_of_another_project_cannot_be_run(
    runs_api: TestClient, other_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    response = other_api.post(PATH, json={"prompt": {"name": "greet"}, "variables": {"name": "A"}})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "PROMPT_NOT_FOUND"
    assert openai_stub.calls == []


def test_bad_runs_are_refused_before_anything_is_called(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    cases = [
        ({"prompt": {**INLINE, "model": "mystery-1"}, "variables": {"name": "A"}}, "models"),
        ({"prompt": INLINE, "variables": {"name": "A"}, "models": ["nope"]}, "models"),
        ({"prompt": INLINE, "variables": {}}, None),
        ({"prompt": INLINE, "variables": {"name": "A"}, "repetitions": 11}, "repetitions"),
        ({"prompt": INLINE, "dataset": {"name": "d", "limit": 101}}, "dataset.limit"),
        ({"prompt": INLINE, "variables": {"name": "A"}, "dataset": {"name": "d"}}, None),
        ({"prompt": {"name": "ghost"}}, None),
    ]
    for body, field in cases:
        response = runs_api.post(PATH, json=body)
        assert response.status_code in (400, 404), (body, response.text)
        error = response.json()["error"]
        if field is not None:
            assert field in str(error["details"]), (body, error)
    assert runs_api.post(PATH, json={"prompt": INLINE}).json()["error"]["code"] == (
        "INVALID_TEMPLATE"
    )
    assert openai_stub.calls == []


def test_a_model_named_through_a_connection_keeps_its_name_in_the_cell_and_record(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    made = runs_api.post(
        "/v1/connections",
        json={
            "name": "team",
            "provider": "openai",
            "api_key": "sk-team-connection-0001",
            "base_url": f"{openai_stub.url}/v1",
        },
    )
    assert made.status_code == 201, made.text
    data = play(runs_api, prompt=INLINE, variables={"name": "Ada"}, models=["team/gpt-4o-mini"])
    (cell,) = data["cells"]
    assert cell["status"] == "success" and cell["model"] == "team/gpt-4o-mini"
    assert openai_stub.calls[-1].body["model"] == "gpt-4o-mini"
    assert openai_stub.calls[-1].headers["authorization"] == "Bearer sk-team-connection-0001"
    detail = record(runs_api, cell["request_id"])
    assert detail["model"] == "team/gpt-4o-mini"
    assert detail["metadata"]["connection"] == "team"


def test_a_chat_prompt_with_tools_answers_the_tool_call_in_its_cell(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.replies = Replies()
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    data = play(
        runs_api,
        prompt={
            "type": "chat",
            "messages": [{"role": "user", "content": "Weather in {{city}}?"}],
            "model": "gpt-4o-mini",
            "tools": [tool],
            "tool_choice": "required",
        },
        variables={"city": "Paris"},
    )
    (cell,) = data["cells"]
    assert cell["status"] == "success"
    assert [c["name"] for c in cell["tool_calls"]] == ["get_weather"]
    assert openai_stub.calls[-1].body["tools"][0]["function"]["name"] == "get_weather"


def test_overrides_that_change_nothing_sent_run_the_stored_version_and_type_is_fixed(
    runs_api: TestClient, openai_stub: OpenAIStub
) -> None:
    create_prompt(runs_api)
    data = play(
        runs_api,
        prompt={"name": "greet", "overrides": {"description": "draft", "tags": ["x"]}},
        variables={"name": "Ada"},
    )
    detail = record(runs_api, data["cells"][0]["request_id"])
    assert detail["version"] == 1 and "base_version" not in detail["metadata"]
    refused = runs_api.post(
        PATH,
        json={"prompt": {"name": "greet", "overrides": {"type": "chat"}}, "variables": {}},
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["details"]["field"] == "prompt.overrides.type"
    chat_field = runs_api.post(
        PATH,
        json={
            "prompt": {
                "name": "greet",
                "overrides": {"messages": [{"role": "user", "content": "Hi"}]},
            },
            "variables": {"name": "Ada"},
        },
    )
    assert chat_field.status_code == 400
    assert chat_field.json()["error"]["details"]["field"] == "prompt.overrides.messages"
    assert len(openai_stub.calls) == 1
