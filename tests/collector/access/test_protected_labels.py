"""Protected labels (issue 51 point 5; docs/api-notes.md, "Protected labels"): an admin names a
project's protected labels; only an admin (a key with ``admin``, a user whose role is admin or
owner) then attaches, moves or removes one, whichever write carries it, and a refused write
changes nothing. Real chDB, real HTTP (ASGI transport), the accounts service's real sessions.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.collector.access.steps import PROMPT, SignIn
from tests.collector.contract import assert_error

PROTECTED = "/v1/projects/default/protected-labels"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def key_with(api: TestClient, *scopes: str) -> dict[str, str]:
    made = api.post("/v1/keys", json={"scopes": list(scopes)})
    assert made.status_code == 201, made.text
    return bearer(made.json()["data"]["api_key"])


@pytest.fixture
def guarded(api: TestClient) -> TestClient:
    """Project default with prompt greet at versions 1 and 2, production on 1, protected."""
    assert api.post("/v1/prompts", json={**PROMPT, "labels": ["production"]}).status_code == 201
    assert api.patch("/v1/prompts/greet", json={"template": "Hello {{n}}"}).status_code == 200
    put = api.put(PROTECTED, json={"labels": ["production", "eu-prod"]})
    assert put.status_code == 200, put.text
    return api


def labels(api: TestClient, name: str = "greet") -> dict[str, int]:
    response = api.get(f"/v1/prompts/{name}/labels")
    assert response.status_code == 200, response.text
    return {item["label"]: item["version"] for item in response.json()["data"]}


def versions(api: TestClient) -> list[int]:
    return [v["version"] for v in api.get("/v1/prompts/greet/versions").json()["data"]]


# Every write that can attach, move or remove a label, each naming ``production``.
LABEL_WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("PUT", "/v1/prompts/greet/labels/production", {"version": 2}),
    ("DELETE", "/v1/prompts/greet/labels/production", None),
    ("PATCH", "/v1/prompts/greet", {"template": "Hey {{n}}", "labels": ["production"]}),
    ("POST", "/v1/prompts/greet/rollback", {"version": 1, "labels": ["production"]}),
    ("POST", "/v1/prompts", {**PROMPT, "name": "fresh", "labels": ["production"]}),
    ("DELETE", "/v1/prompts/greet", None),  # deleting the prompt removes its production
]
WRITE_IDS = [f"{m} {p}" for m, p, _ in LABEL_WRITES]


def test_the_list_is_read_by_readers_and_set_by_admins(guarded: TestClient) -> None:
    shown = guarded.get(PROTECTED, headers=key_with(guarded, "read"))

    assert shown.status_code == 200, shown.text
    data = shown.json()["data"]
    assert data["project"] == "default"
    assert data["labels"] == ["eu-prod", "production"]
    assert data["updated_at"] is not None and data["updated_by"].startswith("key_")
    writer = key_with(guarded, "write", "read")
    refused = guarded.put(PROTECTED, json={"labels": []}, headers=writer)
    assert assert_error(refused, 403, "INSUFFICIENT_SCOPE")["required"] == "admin"
    assert guarded.get(PROTECTED).json()["data"]["labels"] == ["eu-prod", "production"]
    # An empty list protects nothing again.
    assert guarded.put(PROTECTED, json={"labels": []}).json()["data"]["labels"] == []


@pytest.mark.parametrize(("method", "path", "body"), LABEL_WRITES, ids=WRITE_IDS)
def test_a_write_key_cannot_change_a_protected_label(
    guarded: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    writer = key_with(guarded, "write", "read")

    refused = guarded.request(method, path, json=body, headers=writer)

    details = assert_error(refused, 403, "INSUFFICIENT_SCOPE", type_="permission_error")
    assert details["required"] == "admin" and details["label"] == "production"
    # Nothing changed: no version, no label moved, no prompt made or deleted.
    assert labels(guarded) == {"production": 1}
    assert versions(guarded) == [2, 1]
    assert guarded.get("/v1/prompts/fresh").status_code == 404


@pytest.mark.parametrize(("method", "path", "body"), LABEL_WRITES, ids=WRITE_IDS)
def test_an_admin_key_changes_a_protected_label(
    guarded: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    admin = key_with(guarded, "admin")

    done = guarded.request(method, path, json=body, headers=admin)

    assert done.status_code in (200, 201), done.text


def test_other_labels_stay_a_members_to_move(guarded: TestClient) -> None:
    writer = key_with(guarded, "write", "read")

    moved = guarded.put("/v1/prompts/greet/labels/staging", json={"version": 2}, headers=writer)
    patched = guarded.patch(
        "/v1/prompts/greet", json={"template": "Yo", "labels": ["canary"]}, headers=writer
    )

    assert moved.status_code == 200, moved.text
    assert patched.status_code == 200, patched.text
    assert labels(guarded) == {"production": 1, "staging": 2, "canary": 3}


def test_users_below_admin_are_refused_and_admins_are_not(
    guarded: TestClient, sign_in: SignIn
) -> None:
    member, member_csrf = sign_in("member")
    admin, admin_csrf = sign_in("admin")

    for method, path, body in LABEL_WRITES:
        refused = member.request(method, path, json=body, headers=member_csrf)
        details = assert_error(refused, 403, "FORBIDDEN", type_="permission_error")
        assert details["required_role"] == "admin" and details["label"] == "production"
    # Nor may a member protect or unprotect labels itself.
    refused = member.put(PROTECTED, json={"labels": []}, headers=member_csrf)
    assert assert_error(refused, 403, "FORBIDDEN")["required_role"] == "admin"
    assert labels(guarded) == {"production": 1}

    moved = admin.put(
        "/v1/prompts/greet/labels/production", json={"version": 2}, headers=admin_csrf
    )
    assert moved.status_code == 200, moved.text
    assert labels(guarded) == {"production": 2}
    set_by_admin = admin.put(PROTECTED, json={"labels": ["production"]}, headers=admin_csrf)
    assert set_by_admin.json()["data"]["updated_by"] == "admin@example.com"


def test_another_projects_list_is_not_found(guarded: TestClient) -> None:
    other = bearer(guarded.app.state.services.keys.create("other"))  # type: ignore[attr-defined]

    for method, body in (("GET", None), ("PUT", {"labels": []})):
        refused = guarded.request(method, PROTECTED, json=body, headers=other)
        assert_error(refused, 404, "PROJECT_NOT_FOUND", type_="not_found_error")
    assert guarded.get(PROTECTED).json()["data"]["labels"] == ["eu-prod", "production"]
    # Its own list is its own: nothing protected there.
    mine = guarded.get("/v1/projects/other/protected-labels", headers=other)
    assert mine.json()["data"]["labels"] == []


@pytest.mark.parametrize(
    ("labels_sent", "field"),
    [(["latest"], "labels.0"), (["ok", "bad label!"], "labels.1"), (["x"] * 51, "labels")],
)
def test_a_bad_list_is_a_400_naming_the_field(
    guarded: TestClient, labels_sent: list[str], field: str
) -> None:
    refused = guarded.put(PROTECTED, json={"labels": labels_sent})
    assert_error(refused, 400, "VALIDATION_ERROR", field)
    assert_error(guarded.put(PROTECTED, json={}), 400, "VALIDATION_ERROR", "labels")
