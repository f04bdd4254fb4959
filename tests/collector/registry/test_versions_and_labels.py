"""Version history, rollback (spec 4.4) and labels (docs/api-notes.md, "Labels")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.contract import assert_error


@pytest.fixture
def prompt(api: TestClient) -> str:
    """A prompt with three versions that differ in template, model and parameters."""
    api.post(
        "/v1/prompts",
        json={
            "name": "summary",
            "template": "Summarise {text}",
            "model": "gpt-4o-mini",
            "parameters": {"temperature": 0.1},
            "tags": ["a"],
        },
    )
    api.patch(
        "/v1/prompts/summary",
        json={"template": "Summarise briefly {text}", "parameters": {"temperature": 0.5}},
    )
    api.patch("/v1/prompts/summary", json={"model": "claude-sonnet-4", "tags": ["b"]})
    return "summary"


def versions(api: TestClient, name: str) -> list[dict[str, Any]]:
    response = api.get(f"/v1/prompts/{name}/versions")
    assert response.status_code == 200
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def test_versions_are_listed_newest_first(api: TestClient, prompt: str) -> None:
    listed = versions(api, prompt)

    assert [v["version"] for v in listed] == [3, 2, 1]
    assert [v["template"] for v in listed] == [
        "Summarise briefly {text}",
        "Summarise briefly {text}",
        "Summarise {text}",
    ]
    assert [v["model"] for v in listed] == ["claude-sonnet-4", "gpt-4o-mini", "gpt-4o-mini"]
    assert all(v["created_at"].endswith("Z") for v in listed)
    # Compared as times: a time on a whole second is written without its fraction.
    assert _time(listed[0]["created_at"]) >= _time(listed[2]["created_at"])


def test_one_version_includes_its_parameters(api: TestClient, prompt: str) -> None:
    data = api.get(f"/v1/prompts/{prompt}/versions/1").json()["data"]

    assert data["version"] == 1
    assert data["template"] == "Summarise {text}"
    assert data["parameters"] == {"temperature": 0.1}


def test_unknown_version_is_version_not_found(api: TestClient, prompt: str) -> None:
    response = api.get(f"/v1/prompts/{prompt}/versions/4")

    assert_error(response, 404, "VERSION_NOT_FOUND")


def test_rollback_makes_a_new_version_with_the_target_content(api: TestClient, prompt: str) -> None:
    response = api.post(f"/v1/prompts/{prompt}/rollback", json={"version": 1})

    assert response.status_code == 200
    data = response.json()["data"]
    assert data["version"] == 4
    assert data["template"] == "Summarise {text}"
    assert "version 1" in data["note"] and "version 4" in data["note"]
    restored = api.get(f"/v1/prompts/{prompt}/versions/4").json()["data"]
    assert (restored["model"], restored["parameters"]) == ("gpt-4o-mini", {"temperature": 0.1})
    assert restored["note"] == data["note"]


def test_rollback_never_rewrites_history(api: TestClient, prompt: str) -> None:
    before = versions(api, prompt)

    api.post(f"/v1/prompts/{prompt}/rollback", json={"version": 2})

    after = versions(api, prompt)
    assert after[1:] == before
    assert after[0]["version"] == 4


def test_rollback_to_a_missing_version_changes_nothing(api: TestClient, prompt: str) -> None:
    response = api.post(f"/v1/prompts/{prompt}/rollback", json={"version": 9})

    assert_error(response, 404, "VERSION_NOT_FOUND")
    assert len(versions(api, prompt)) == 3


def test_rollback_keeps_the_current_tags(api: TestClient, prompt: str) -> None:
    api.post(f"/v1/prompts/{prompt}/rollback", json={"version": 1})

    assert [p["name"] for p in api.get("/v1/prompts", params={"tags": "b"}).json()["data"]] == [
        prompt
    ]


# -- labels ---------------------------------------------------------------------------------


def test_put_attaches_a_label_and_versions_show_it(api: TestClient, prompt: str) -> None:
    response = api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 2})

    assert response.status_code == 200
    assert response.json()["data"]["label"] == "production"
    assert response.json()["data"]["version"] == 2
    assert [(v["version"], v["labels"]) for v in versions(api, prompt)] == [
        (3, []),
        (2, ["production"]),
        (1, []),
    ]
    assert api.get(f"/v1/prompts/{prompt}/versions/2").json()["data"]["labels"] == ["production"]


def test_a_label_points_at_one_version_at_a_time(api: TestClient, prompt: str) -> None:
    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 1})

    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 3})

    labels = api.get(f"/v1/prompts/{prompt}/labels").json()["data"]
    assert [(label["label"], label["version"]) for label in labels] == [("production", 3)]
    assert [v["labels"] for v in versions(api, prompt)] == [["production"], [], []]


def test_labels_list_and_delete(api: TestClient, prompt: str) -> None:
    api.put(f"/v1/prompts/{prompt}/labels/staging", json={"version": 3})
    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 2})

    listed = api.get(f"/v1/prompts/{prompt}/labels").json()["data"]
    removed = api.delete(f"/v1/prompts/{prompt}/labels/staging")

    assert [(label["label"], label["version"]) for label in listed] == [
        ("production", 2),
        ("staging", 3),
    ]
    assert removed.json()["data"] == {"deleted": True, "label": "staging"}
    after = api.get(f"/v1/prompts/{prompt}/labels").json()["data"]
    assert [label["label"] for label in after] == ["production"]
    again = api.delete(f"/v1/prompts/{prompt}/labels/staging")
    assert_error(again, 404, "LABEL_NOT_FOUND")


def test_label_on_a_missing_version_is_refused(api: TestClient, prompt: str) -> None:
    response = api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 7})

    assert_error(response, 404, "VERSION_NOT_FOUND")
    assert api.get(f"/v1/prompts/{prompt}/labels").json()["data"] == []


@pytest.mark.parametrize("method", ["put", "delete"])
def test_latest_is_reserved(api: TestClient, prompt: str, method: str) -> None:
    response = api.request(
        method.upper(), f"/v1/prompts/{prompt}/labels/latest", json={"version": 1}
    )

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "label"


def test_create_patch_and_rollback_attach_labels_to_the_new_version(api: TestClient) -> None:
    api.post(
        "/v1/prompts",
        json={"name": "l", "template": "a", "model": "gpt-4o", "labels": ["staging"]},
    )
    api.patch("/v1/prompts/l", json={"template": "b", "labels": ["production"]})
    api.post("/v1/prompts/l/rollback", json={"version": 1, "labels": ["staging"]})

    assert [(v["version"], v["labels"]) for v in versions(api, "l")] == [
        (3, ["staging"]),
        (2, ["production"]),
        (1, []),
    ]


def test_labels_in_a_create_body_are_validated_before_anything_is_stored(
    api: TestClient,
) -> None:
    response = api.post(
        "/v1/prompts",
        json={"name": "l", "template": "a", "model": "gpt-4o", "labels": ["latest"]},
    )

    assert response.status_code == 400
    assert api.get("/v1/prompts/l").status_code == 404


def test_labels_of_a_deleted_prompt_do_not_follow_its_name(api: TestClient, prompt: str) -> None:
    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 1})
    api.delete(f"/v1/prompts/{prompt}")
    api.post("/v1/prompts", json={"name": prompt, "template": "new", "model": "gpt-4o"})

    assert api.get(f"/v1/prompts/{prompt}/labels").json()["data"] == []
    missing = api.get(f"/v1/prompts/{prompt}/versions/by-label/production/template")
    assert missing.json()["error"]["code"] == "LABEL_NOT_FOUND"


def test_reads_follow_every_write_at_once(api: TestClient, prompt: str) -> None:
    """Template and get reads are cached in process; no write may leave them stale."""
    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 1})
    by_label = f"/v1/prompts/{prompt}/versions/by-label/production/template"
    seen = [api.get(by_label).json()["version"], api.get(f"/v1/prompts/{prompt}").json()["data"]]

    api.put(f"/v1/prompts/{prompt}/labels/production", json={"version": 2})
    assert api.get(by_label).json()["version"] == 2
    api.patch(f"/v1/prompts/{prompt}", json={"template": "newest {text}"})
    assert api.get(f"/v1/prompts/{prompt}").json()["data"]["template"] == "newest {text}"
    api.post(f"/v1/prompts/{prompt}/rollback", json={"version": 1})
    assert api.get(f"/v1/prompts/{prompt}/template").json()["content"] == "Summarise {{text}}"
    api.delete(f"/v1/prompts/{prompt}/labels/production")
    assert api.get(by_label).status_code == 404
    api.delete(f"/v1/prompts/{prompt}")
    assert api.get(f"/v1/prompts/{prompt}").status_code == 404
    assert seen[0] == 1 and seen[1]["version"] == 3


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
