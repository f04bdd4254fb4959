"""Prompts (spec 4.1): create, get, list, update, delete through HTTP."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

PROMPT = {
    "name": "support-reply",
    "description": "Answer a support ticket",
    "template": "You are {persona}. Answer: {question}",
    "model": "gpt-4o-mini",
    "parameters": {"temperature": 0.3, "max_tokens": 256},
    "tags": ["support", "email"],
    "folder": "/customer/support",
}


def create(api: TestClient, **fields: Any) -> dict[str, Any]:
    response = api.post("/v1/prompts", json={**PROMPT, **fields})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def test_create_returns_every_field(api: TestClient) -> None:
    data = create(api)

    assert set(data) == {
        "id",
        "name",
        "description",
        "template",
        "model",
        "parameters",
        "version",
        "tags",
        "folder",
        "created_at",
        "updated_at",
    }
    assert data["id"].startswith("prompt_") and len(data["id"]) == len("prompt_") + 32
    assert data["version"] == 1
    assert {k: data[k] for k in PROMPT} == PROMPT
    assert data["created_at"].endswith("Z") and data["created_at"] == data["updated_at"]


def test_create_with_only_name_template_model(api: TestClient) -> None:
    response = api.post("/v1/prompts", json={"name": "tiny", "template": "Hi", "model": "gpt-4o"})

    assert response.status_code == 201
    data = response.json()["data"]
    assert (data["description"], data["parameters"], data["tags"], data["folder"]) == (
        "",
        {},
        [],
        None,
    )


def test_get_returns_the_spec_subset_by_name_and_by_id(api: TestClient) -> None:
    created = create(api)

    by_name = api.get("/v1/prompts/support-reply").json()["data"]
    by_id = api.get(f"/v1/prompts/{created['id']}").json()["data"]

    assert by_name == by_id
    assert by_name == {
        "id": created["id"],
        "name": "support-reply",
        "template": PROMPT["template"],
        "model": "gpt-4o-mini",
        "version": 1,
        "created_at": created["created_at"],
        # Beyond the spec's subset: what an edit form needs to show the prompt as it is.
        "description": PROMPT["description"],
        "tags": PROMPT["tags"],
        "folder": PROMPT["folder"],
    }


def test_get_and_list_show_the_newest_versions_description_tags_and_folder(
    api: TestClient,
) -> None:
    create(api)
    api.patch(
        "/v1/prompts/support-reply", json={"description": "v2", "tags": ["chat"], "folder": None}
    )

    got = api.get("/v1/prompts/support-reply").json()["data"]
    (listed,) = api.get("/v1/prompts").json()["data"]

    assert (got["description"], got["tags"], got["folder"]) == ("v2", ["chat"], None)
    assert (listed["description"], listed["tags"], listed["folder"]) == ("v2", ["chat"], None)


def test_routes_are_served_under_api_v1_too(api: TestClient) -> None:
    create(api)

    assert (
        api.get("/api/v1/prompts/support-reply").json()
        == api.get("/v1/prompts/support-reply").json()
    )


def test_update_makes_a_new_version_and_returns_the_update_subset(api: TestClient) -> None:
    created = create(api)

    response = api.patch("/v1/prompts/support-reply", json={"template": "New {question}"})

    assert response.status_code == 200
    data = response.json()["data"]
    assert set(data) == {"id", "name", "template", "model", "version", "updated_at"}
    assert (data["id"], data["version"], data["template"]) == (created["id"], 2, "New {question}")
    # Compared as times: a time on a whole second is written without its fraction.
    assert _time(data["updated_at"]) >= _time(created["updated_at"])
    assert api.get("/v1/prompts/support-reply").json()["data"]["version"] == 2


@pytest.mark.parametrize(
    "change",
    [
        {"description": "other"},
        {"tags": ["new"]},
        {"folder": "/elsewhere"},
        {"parameters": {"temperature": 1.0}},
        {"model": "claude-sonnet-4"},
        {"template": PROMPT["template"]},  # same value: still a new version
    ],
)
def test_every_patch_makes_a_new_version(api: TestClient, change: dict[str, Any]) -> None:
    create(api)

    data = api.patch("/v1/prompts/support-reply", json=change).json()["data"]

    assert data["version"] == 2
    versions = api.get("/v1/prompts/support-reply/versions").json()["data"]
    assert [v["version"] for v in versions] == [2, 1]


def test_update_keeps_the_fields_it_does_not_change(api: TestClient) -> None:
    create(api)
    api.patch("/v1/prompts/support-reply", json={"description": "changed"})

    detail = api.get("/v1/prompts/support-reply/versions/2").json()["data"]
    listed = api.get("/v1/prompts", params={"tags": "support"}).json()["data"]

    assert detail["template"] == PROMPT["template"]
    assert detail["parameters"] == PROMPT["parameters"]
    assert listed[0]["description"] == "changed"


def test_renaming_through_patch_is_refused_and_changes_nothing(api: TestClient) -> None:
    create(api)

    response = api.patch("/v1/prompts/support-reply", json={"name": "renamed"})

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "name"
    assert api.get("/v1/prompts/support-reply").json()["data"]["version"] == 1


def test_delete_is_soft_and_hides_the_prompt_everywhere(api: TestClient) -> None:
    created = create(api)

    response = api.delete("/v1/prompts/support-reply")

    assert response.json() == {"data": {"deleted": True, "id": created["id"]}}
    for path in (
        "/v1/prompts/support-reply",
        f"/v1/prompts/{created['id']}",
        "/v1/prompts/support-reply/versions",
        "/v1/prompts/support-reply/template",
        "/v1/prompts/support-reply/versions/1/template",
    ):
        failure = api.get(path)
        assert failure.status_code == 404, path
        assert failure.json()["error"]["code"] == "PROMPT_NOT_FOUND"
    assert api.get("/v1/prompts").json()["pagination"]["total"] == 0
    assert api.delete("/v1/prompts/support-reply").status_code == 404


def test_a_deleted_name_can_be_created_again_as_a_new_prompt(api: TestClient) -> None:
    first = create(api)
    api.patch("/v1/prompts/support-reply", json={"template": "v2"})
    api.delete("/v1/prompts/support-reply")

    second = create(api, template="fresh {x}")

    assert second["id"] != first["id"]
    assert second["version"] == 1
    versions = api.get("/v1/prompts/support-reply/versions").json()["data"]
    assert [v["template"] for v in versions] == ["fresh {x}"]
    assert api.get(f"/v1/prompts/{first['id']}").status_code == 404


def test_create_with_a_live_name_is_a_conflict(api: TestClient) -> None:
    create(api)

    response = api.post("/v1/prompts", json=PROMPT)

    assert response.status_code == 409
    assert response.json()["error"] == {
        "type": "conflict_error",
        "message": "Prompt 'support-reply' already exists",
        "code": "PROMPT_ALREADY_EXISTS",
        "details": {"prompt_name": "support-reply"},
    }


# -- list -----------------------------------------------------------------------------------


def test_list_items_carry_the_spec_fields_newest_first(api: TestClient) -> None:
    for name in ("first", "second", "third"):
        create(api, name=name, description=f"about {name}")

    body = api.get("/v1/prompts").json()

    assert [p["name"] for p in body["data"]] == ["third", "second", "first"]
    assert set(body["data"][0]) == {
        "id",
        "name",
        "description",
        "version",
        "created_at",
        "tags",
        "folder",
    }
    assert body["pagination"] == {"has_more": False, "total": 3}


def test_list_pages_with_an_opaque_cursor_until_exhausted(api: TestClient) -> None:
    names = [f"p{i:02d}" for i in range(25)]
    for name in names:
        create(api, name=name)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 10}
        if cursor:
            params["cursor"] = cursor
        body = api.get("/v1/prompts", params=params).json()
        pages += 1
        seen += [p["name"] for p in body["data"]]
        assert body["pagination"]["total"] == 25
        if not body["pagination"]["has_more"]:
            assert "next_cursor" not in body["pagination"]
            break
        cursor = body["pagination"]["next_cursor"]

    assert pages == 3
    assert seen == list(reversed(names))


def test_list_limit_defaults_to_20(api: TestClient) -> None:
    for i in range(21):
        create(api, name=f"n{i}")

    body = api.get("/v1/prompts").json()

    assert len(body["data"]) == 20
    assert body["pagination"]["has_more"] is True


def test_list_filters_by_tags_folder_and_search(api: TestClient) -> None:
    create(api, name="a", tags=["x", "y"], folder="/team/alpha", description="Greets users")
    create(api, name="b", tags=["x"], folder="/team/alpha/sub", description="Summarises")
    create(api, name="c", tags=["z"], folder="/other", description="greeting card")

    def names(**params: Any) -> list[str]:
        body = api.get("/v1/prompts", params=params).json()
        assert body["pagination"]["total"] == len(body["data"])
        return sorted(p["name"] for p in body["data"])

    assert names(tags="x") == ["a", "b"]
    assert names(tags=["x", "y"]) == ["a"]
    assert names(tags="x,y") == ["a"]
    assert names(folder="/team/alpha") == ["a", "b"]
    assert names(folder="/team/alpha/sub") == ["b"]
    assert names(folder="/team/al") == []
    assert names(search="GREET") == ["a", "c"]
    assert names(search="b") == ["b"]
    assert names(tags="x", search="summ") == ["b"]


def test_list_total_counts_matches_not_the_page(api: TestClient) -> None:
    for i in range(5):
        create(api, name=f"tagged{i}", tags=["keep"])
    create(api, name="untagged", tags=[])

    body = api.get("/v1/prompts", params={"tags": "keep", "limit": 2}).json()

    assert len(body["data"]) == 2
    assert body["pagination"]["total"] == 5


def test_list_shows_the_newest_version_number(api: TestClient) -> None:
    create(api)
    api.patch("/v1/prompts/support-reply", json={"template": "v2"})
    api.patch("/v1/prompts/support-reply", json={"template": "v3"})

    item = api.get("/v1/prompts").json()["data"][0]

    assert item["version"] == 3


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
