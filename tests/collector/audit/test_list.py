"""``GET /v1/audit``: a project's entries for its admins, newest first, by filter and page."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.models.keys import KeyCreate
from promptrail.collector.services.keys import created_key
from tests.collector.audit.steps import PROMPT, SignIn, entries
from tests.collector.contract import assert_error


def write_three(api: TestClient) -> None:
    for name in ("a", "b", "c"):
        assert api.post("/v1/prompts", json={**PROMPT, "name": name}).status_code == 201


def test_newest_first_in_pages_that_join_up(api: TestClient) -> None:
    write_three(api)
    assert api.patch("/v1/prompts/a", json={"template": "changed"}).status_code == 200
    everything = entries(api)
    assert [(e["action"], e["resource_id"]) for e in everything] == [
        ("prompt.update", "a"),
        ("prompt.create", "c"),
        ("prompt.create", "b"),
        ("prompt.create", "a"),
    ]
    first = api.get("/v1/audit", params={"limit": 3}).json()
    assert first["pagination"]["has_more"] is True
    second = api.get(
        "/v1/audit", params={"limit": 3, "cursor": first["pagination"]["next_cursor"]}
    ).json()
    assert second["pagination"] == {"has_more": False}
    assert first["data"] + second["data"] == everything


def test_filters_by_actor_resource_and_time(api: TestClient, sign_in: SignIn) -> None:
    write_three(api)
    owner, csrf = sign_in("owner")
    assert owner.patch("/v1/prompts/b", json={"template": "x"}, headers=csrf).status_code == 200
    everything = entries(api)
    user_id = everything[0]["actor"]["id"]
    key_id = everything[-1]["actor"]["id"]

    assert [e["resource_id"] for e in entries(api, actor=user_id)] == ["b"]
    assert [e["resource_id"] for e in entries(api, actor=key_id)] == ["c", "b", "a"]
    assert [e["action"] for e in entries(api, resource_type="prompt", resource_id="b")] == [
        "prompt.update",
        "prompt.create",
    ]
    assert entries(api, resource_type="connection") == []
    # from is inclusive, to exclusive.
    at = everything[1]["at"]  # the creation of c
    assert [e["resource_id"] for e in entries(api, **{"from": at})] == ["b", "c"]
    assert [e["resource_id"] for e in entries(api, to=at)] == ["b", "a"]


def test_only_admins_read_the_log_and_only_their_projects(api: TestClient, sign_in: SignIn) -> None:
    write_three(api)
    for role in ("member", "viewer", "annotator"):
        browser, _ = sign_in(role)
        refused = browser.get("/v1/audit")
        assert assert_error(refused, 403, "FORBIDDEN")["required_role"] == "admin"
    admin, _ = sign_in("admin")
    assert len(admin.get("/v1/audit").json()["data"]) == 3

    made = api.post("/v1/keys", json={"scopes": ["read", "write"]})
    assert made.status_code == 201, made.text
    reader = TestClient(api.app, headers={"X-API-Key": made.json()["data"]["api_key"]})
    assert_error(reader.get("/v1/audit"), 403, "INSUFFICIENT_SCOPE")

    # Another project's admin key sees none of default's entries.
    services: Any = api.app.state.services
    other_key = created_key(services.keys, KeyCreate(project="other")).api_key
    stranger = TestClient(api.app, headers={"X-API-Key": other_key})
    assert stranger.get("/v1/audit").json()["data"] == []


def test_bad_parameters_are_400s(api: TestClient) -> None:
    assert_error(api.get("/v1/audit", params={"cursor": "nonsense"}), 400, "VALIDATION_ERROR")
    assert_error(api.get("/v1/audit", params={"limit": 0}), 400, "VALIDATION_ERROR")
    naive = api.get("/v1/audit", params={"from": "2026-01-01T00:00:00"})
    assert_error(naive, 400, "VALIDATION_ERROR")
