"""Template retrieval for local execution (spec 4.2, 2.3)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient


def make(api: TestClient, name: str = "t", **fields: Any) -> dict[str, Any]:
    body = {"name": name, "template": "Hello {name}", "model": "gpt-4o", **fields}
    response = api.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_template_payload_is_unwrapped_with_every_field(api: TestClient) -> None:
    created = make(
        api,
        template="Dear {customer}, about {topic}: {customer}",
        parameters={"temperature": 0.7, "max_tokens": 300},
    )

    response = api.get("/v1/prompts/t/template")

    assert response.status_code == 200
    payload = response.json()
    assert "data" not in payload
    assert payload["prompt_id"] == str(uuid.UUID(hex=created["id"].removeprefix("prompt_")))
    uuid.UUID(payload["version_id"])
    assert {k: v for k, v in payload.items() if k not in ("prompt_id", "version_id")} == {
        "prompt_name": "t",
        "version": 1,
        "type": "text",
        "content": "Dear {{customer}}, about {{topic}}: {{customer}}",
        "variables": {"customer": {"type": "string"}, "topic": {"type": "string"}},
        "provider": "openai",
        "model": "gpt-4o",
        "temperature": 0.7,
        "max_tokens": 300,
    }


@pytest.mark.parametrize(
    ("stored", "payload"),
    [
        ("{a}", "{{a}}"),
        ('JSON: {{"k": {value}}}', 'JSON: {"k": {{value}}}'),
        ("{{literal}}", "{literal}"),
        ("{{{x}}}", "{{{x}}}"),
        ("no variables", "no variables"),
        ("ünï {ça_va} 日本", "ünï {{ça_va}} 日本"),
    ],
)
def test_single_braces_become_double_and_literals_stay_literal(
    api: TestClient, stored: str, payload: str
) -> None:
    make(api, template=stored)

    assert api.get("/v1/prompts/t/template").json()["content"] == payload


def test_payload_by_version_number_and_by_label(api: TestClient) -> None:
    make(api, template="one {a}")
    api.patch("/v1/prompts/t", json={"template": "two {b}"})
    api.put("/v1/prompts/t/labels/production", json={"version": 1})

    latest = api.get("/v1/prompts/t/template").json()
    by_number = api.get("/v1/prompts/t/versions/1/template").json()
    by_label = api.get("/v1/prompts/t/versions/by-label/production/template").json()
    by_latest = api.get("/v1/prompts/t/versions/by-label/latest/template").json()

    assert (latest["version"], latest["content"], latest["variables"]) == (
        2,
        "two {{b}}",
        {"b": {"type": "string"}},
    )
    assert by_number == by_label
    assert by_number["version"] == 1 and by_number["content"] == "one {{a}}"
    assert by_latest == latest
    assert by_number["version_id"] != latest["version_id"]


def test_payload_by_prompt_id(api: TestClient) -> None:
    created = make(api)

    by_id = api.get(f"/v1/prompts/{created['id']}/template").json()

    assert by_id == api.get("/v1/prompts/t/template").json()


@pytest.mark.parametrize(
    ("model", "provider", "served_model"),
    [
        ("gpt-4o", "openai", "gpt-4o"),
        ("o3-mini", "openai", "o3-mini"),
        ("chatgpt-4o-latest", "openai", "chatgpt-4o-latest"),
        ("claude-3-5-haiku-latest", "anthropic", "claude-3-5-haiku-latest"),
        ("anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4"),
        ("openai/llama3.1:8b", "openai", "llama3.1:8b"),
    ],
)
def test_provider_follows_the_model(
    api: TestClient, model: str, provider: str, served_model: str
) -> None:
    make(api, model=model)

    payload = api.get("/v1/prompts/t/template").json()

    assert (payload["provider"], payload["model"]) == (provider, served_model)


def test_missing_parameters_are_null(api: TestClient) -> None:
    make(api)

    payload = api.get("/v1/prompts/t/template").json()

    assert (payload["temperature"], payload["max_tokens"]) == (None, None)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v1/prompts/nope/template", "PROMPT_NOT_FOUND"),
        ("/v1/prompts/t/versions/5/template", "VERSION_NOT_FOUND"),
        ("/v1/prompts/t/versions/by-label/prod/template", "LABEL_NOT_FOUND"),
        ("/v1/prompts/nope/versions/by-label/prod/template", "PROMPT_NOT_FOUND"),
    ],
)
def test_missing_things_are_404_with_their_code(api: TestClient, path: str, code: str) -> None:
    make(api)

    response = api.get(path)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == code
