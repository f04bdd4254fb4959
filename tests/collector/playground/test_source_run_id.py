"""A version saved from a playground run keeps the run's id (``source_run_id``): given at
create or PATCH, shown on the version objects, stored, never inherited by the next version;
a value that is no playground run id is a 400."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.store.database import Store
from promptrail.testing import OpenAIStub
from tests.collector.playground.steps import play
from tests.collector.runs.steps import create_prompt


def _version(api: TestClient, number: int) -> dict[str, Any]:
    response = api.get(f"/v1/prompts/greet/versions/{number}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_a_version_saved_from_a_run_keeps_its_id_and_the_next_one_does_not(
    runs_api: TestClient, openai_stub: OpenAIStub, run_settings: Settings
) -> None:
    tried = play(
        runs_api,
        prompt={"template": "Say hello to {name}.", "model": "gpt-4o-mini"},
        variables={"name": "Ada"},
    )
    made = create_prompt(runs_api, source_run_id=tried["id"])
    assert made["source_run_id"] == tried["id"] and "type" not in made
    assert _version(runs_api, 1)["source_run_id"] == tried["id"]

    again = play(
        runs_api,
        prompt={"name": "greet", "overrides": {"template": "Wave at {name}."}},
        variables={"name": "Bo"},
    )
    saved = runs_api.patch(
        "/v1/prompts/greet", json={"template": "Wave at {name}.", "source_run_id": again["id"]}
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["data"]["source_run_id"] == again["id"]
    plain = runs_api.patch("/v1/prompts/greet", json={"description": "edited by hand"})
    assert "source_run_id" not in plain.json()["data"]
    assert "source_run_id" not in _version(runs_api, 3)
    assert _version(runs_api, 2)["source_run_id"] == again["id"]
    listed = runs_api.get("/v1/prompts/greet/versions").json()["data"]
    assert [v.get("source_run_id") for v in listed] == [None, again["id"], tried["id"]]
    # A rollback brings back the restored version's content and the run it came from.
    rolled = runs_api.post("/v1/prompts/greet/rollback", json={"version": 1})
    assert rolled.status_code in (200, 201), rolled.text
    assert _version(runs_api, 4)["source_run_id"] == tried["id"]

    # Stored, not only remembered: another collector of the store reads it.
    store = Store.open(
        run_settings.store_url, run_settings.database, run_settings.clickhouse_cluster
    )
    other = Services.build(run_settings, store)
    try:
        assert (
            other.prompts.resolve_version("default", "greet", number=2).source_run_id
            == (again["id"])
        )
    finally:
        other.close()


def test_a_source_run_id_that_is_no_playground_run_id_is_refused(runs_api: TestClient) -> None:
    for value in ["run_1", "pg_", "pg_XYZ", "pg_" + "0" * 31, "pg_" + "a" * 33, 7, ["pg_"]]:
        response = runs_api.post(
            "/v1/prompts",
            json={"name": "greet", "template": "Hi.", "model": "gpt-4o", "source_run_id": value},
        )
        assert response.status_code == 400, (value, response.text)
        error = response.json()["error"]
        assert error["code"] == "VALIDATION_ERROR"
        assert "source_run_id" in str(error["details"]), error
    assert runs_api.get("/v1/prompts").json()["pagination"]["total"] == 0
    create_prompt(runs_api)
    patched = runs_api.patch("/v1/prompts/greet", json={"source_run_id": "pg_nothex"})
    assert patched.status_code == 400
    assert runs_api.get("/v1/prompts/greet/versions").json()["data"][0]["version"] == 1
