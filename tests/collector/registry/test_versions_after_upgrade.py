"""Prompt versions read from their packed ``version_json`` column, before and after upgrades."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.keys import DEFAULT_AUTH

TEMPLATE = 'Hi {name}! {{literal}} \\ "quoted" 🎉\nline two'
HEADERS = DEFAULT_AUTH

PATHS = [
    "/v1/prompts/greet",
    "/v1/prompts/greet/versions",
    "/v1/prompts/greet/versions/1",
    "/v1/prompts/greet/template",
    "/v1/prompts/greet/versions/1/template",
    "/v1/prompts/greet/versions/by-label/production/template",
]


def _create(api: TestClient) -> None:
    created = api.post(
        "/v1/prompts",
        json={
            "name": "greet",
            "description": 'Says "hello" — in 日本語 too',
            "template": TEMPLATE,
            "model": "gpt-4o-mini",
            "parameters": {"temperature": 0.25, "max_tokens": 300, "stop": ["\n\n"]},
            "tags": ["greeting", "ünïcode"],
            "folder": "support/tier-1",
        },
    )
    assert created.status_code == 201, created.text
    patched = api.patch("/v1/prompts/greet", json={"template": "Hello {name}, again"})
    assert patched.status_code == 200, patched.text
    labeled = api.put("/v1/prompts/greet/labels/production", json={"version": 1})
    assert labeled.status_code == 200, labeled.text


def _reads(api: TestClient) -> dict[str, Any]:
    answers = {}
    for path in PATHS:
        response = api.get(path)
        assert response.status_code == 200, (path, response.text)
        answers[path] = response.json()
    return answers


def test_every_field_comes_back_from_the_packed_column(api: TestClient) -> None:
    _create(api)
    store = api.app.state.services.store  # type: ignore[attr-defined]
    prompt_id = api.get("/v1/prompts/greet").json()["data"]["id"].removeprefix("prompt_")

    packed = store.prompts.version_at("default", prompt_id, 1)
    assert packed is not None
    # Read column by column, as before the packed column: the same version, field for field.
    (row,) = store.client.query(
        f"SELECT toString(version_id), name, description, template, model, parameters, tags, "
        f"folder, note, prompt_created_at, created_at FROM `{store.database}`.prompt_versions "
        "WHERE prompt_id = {pid:String} AND version = 1",
        parameters={"pid": prompt_id},
    ).result_rows
    assert (
        packed.version_id,
        packed.name,
        packed.description,
        packed.template,
        packed.model,
        json.dumps(packed.parameters, ensure_ascii=False, sort_keys=True),
        packed.tags,
        packed.folder,
        packed.note,
        packed.prompt_created_at,
        packed.created_at,
    ) == (*row[:6], list(row[6]), *row[7:9], *(t.replace(tzinfo=UTC) for t in row[9:]))
    assert packed.description == 'Says "hello" — in 日本語 too'
    assert packed.template == TEMPLATE
    assert packed.tags == ["greeting", "ünïcode"]
    assert packed.parameters == {"temperature": 0.25, "max_tokens": 300, "stop": ["\n\n"]}
    assert packed.prompt_created_at.microsecond % 1000 == 0


def test_versions_stored_before_the_column_read_the_same_after_the_upgrade(
    settings: Settings,
) -> None:
    app = create_app(settings)
    with TestClient(app, headers=HEADERS) as api:
        _create(api)
        before = _reads(api)
        client = app.state.services.store.client
        # The store as the release before the packed column left it.
        db = f"`{settings.database}`"
        client.command(f"ALTER TABLE {db}.prompt_versions DROP COLUMN version_json")
        client.command(
            f"ALTER TABLE {db}.schema_migrations DELETE WHERE version = 6",
            settings={"mutations_sync": 2},
        )

    app = create_app(settings)  # start-up adds the column and fills it
    with TestClient(app, headers=HEADERS) as api:
        assert _reads(api) == before
        columns = app.state.services.store.client.query(
            "SELECT name FROM system.columns WHERE database = {db:String} "
            "AND table = 'prompt_versions' AND default_kind = 'MATERIALIZED'",
            parameters={"db": settings.database},
        ).result_rows
        assert columns == [("version_json",)]
