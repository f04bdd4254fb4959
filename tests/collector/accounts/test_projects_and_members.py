"""Projects and their members: who may create, add, change and remove whom."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.collector.accounts.steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    browser_of,
    error,
    make_user,
    sign_in,
)
from tests.keys import DEFAULT_AUTH

Session = tuple[TestClient, dict[str, str]]


@pytest.fixture
def team(browser: TestClient) -> Iterator[dict[str, Session]]:
    """Project ``team`` made by the instance admin (its owner), with users bob, carol, dave
    (none a member yet), each signed in in a browser of their own."""
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    assert browser.post("/v1/projects", json={"name": "team"}, headers=csrf).status_code == 201
    people: dict[str, Session] = {"ada": (browser, csrf)}
    for name in ("bob", "carol", "dave"):
        make_user(browser, csrf, f"{name}@example.com")
        client = browser_of(browser)
        people[name] = (client, sign_in(client, f"{name}@example.com"))
    yield people


def _put(session: Session, email: str, role: str, project: str = "team") -> httpx.Response:
    client, csrf = session
    return client.put(f"/v1/projects/{project}/members/{email}", json={"role": role}, headers=csrf)


def _delete(session: Session, email: str) -> httpx.Response:
    client, csrf = session
    return client.delete(f"/v1/projects/team/members/{email}", headers=csrf)


def test_an_instance_admin_creates_a_project_and_owns_it(browser: TestClient) -> None:
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)

    made = browser.post("/v1/projects", json={"name": "team"}, headers=csrf)
    again = browser.post("/v1/projects", json={"name": "team"}, headers=csrf)
    mine = browser.get("/v1/projects")
    members = browser.get("/v1/projects/team/members")

    assert made.status_code == 201
    assert made.json()["data"]["name"] == "team"
    assert made.json()["data"]["role"] == "owner"
    assert again.status_code == 409
    assert error(again)["code"] == "PROJECT_ALREADY_EXISTS"
    assert [(p["name"], p["role"]) for p in mine.json()["data"]] == [
        ("default", "owner"),
        ("team", "owner"),
    ]
    assert [(m["email"], m["role"], m["role_source"]) for m in members.json()["data"]] == [
        (ADMIN_EMAIL, "owner", "manual")
    ]


def test_a_user_who_is_not_an_instance_admin_creates_neither_projects_nor_users(
    team: dict[str, Session],
) -> None:
    bob, csrf = team["bob"]

    project = bob.post("/v1/projects", json={"name": "mine"}, headers=csrf)
    user = bob.post("/v1/users/accounts", json={"email": "x@example.com"}, headers=csrf)

    for response in (project, user):
        assert response.status_code == 403
        assert error(response)["code"] == "FORBIDDEN"
        assert error(response)["type"] == "permission_error"


def test_an_owner_adds_members_and_a_role_change_shows_at_once(team: dict[str, Session]) -> None:
    bob, _ = team["bob"]
    before = bob.get("/v1/auth/me").json()["data"]["projects"]

    added = _put(team["ada"], "BOB@example.com", "member")
    after = bob.get("/v1/auth/me").json()["data"]["projects"]
    changed = _put(team["ada"], "bob@example.com", "viewer")
    listed = team["ada"][0].get("/v1/projects/team/members").json()["data"]

    assert before == []
    assert added.status_code == 200, added.text
    assert added.json()["data"]["email"] == "bob@example.com"
    assert added.json()["data"]["role_source"] == "manual"
    assert after == [{"name": "team", "role": "member"}]
    assert changed.json()["data"]["role"] == "viewer"
    assert {m["email"]: m["role"] for m in listed} == {
        ADMIN_EMAIL: "owner",
        "bob@example.com": "viewer",
    }


def test_only_an_owner_gives_changes_or_takes_an_owner_or_admin_role(
    team: dict[str, Session],
) -> None:
    assert _put(team["ada"], "carol@example.com", "admin").status_code == 200
    carol = team["carol"]

    adds_viewer = _put(carol, "dave@example.com", "viewer")
    makes_admin = _put(carol, "dave@example.com", "admin")
    demotes_owner = _put(carol, ADMIN_EMAIL, "member")
    removes_owner = _delete(carol, ADMIN_EMAIL)
    removes_viewer = _delete(carol, "dave@example.com")

    assert adds_viewer.status_code == 200
    for refused in (makes_admin, demotes_owner, removes_owner):
        assert refused.status_code == 403, refused.text
        assert error(refused)["code"] == "FORBIDDEN"
        assert error(refused)["details"]["required_role"] == "owner"
    assert removes_viewer.status_code == 200
    assert removes_viewer.json()["data"]["email"] == "dave@example.com"
    assert team["dave"][0].get("/v1/auth/me").json()["data"]["projects"] == []


def test_a_member_or_a_viewer_manages_no_members(team: dict[str, Session]) -> None:
    _put(team["ada"], "bob@example.com", "member")
    _put(team["ada"], "carol@example.com", "viewer")

    for name in ("bob", "carol"):
        listed = team[name][0].get("/v1/projects/team/members")
        grants = _put(team[name], f"{name}@example.com", "admin")
        for refused in (listed, grants):
            assert refused.status_code == 403, refused.text
            assert error(refused)["code"] == "FORBIDDEN"


def test_a_project_keeps_an_owner(team: dict[str, Session]) -> None:
    demoted = _put(team["ada"], ADMIN_EMAIL, "admin")
    removed = _delete(team["ada"], ADMIN_EMAIL)
    _put(team["ada"], "bob@example.com", "owner")
    handed_over = _put(team["ada"], ADMIN_EMAIL, "admin")

    for refused in (demoted, removed):
        assert refused.status_code == 400, refused.text
        assert error(refused)["details"]["field"] == "role"
    assert handed_over.status_code == 200


def test_unknown_users_and_projects_are_404s(team: dict[str, Session]) -> None:
    unknown_user = _put(team["ada"], "nobody@example.com", "member")
    not_a_member = _delete(team["ada"], "dave@example.com")
    unknown_project = _put(team["ada"], "bob@example.com", "member", project="nowhere")

    assert unknown_user.status_code == 404
    assert error(unknown_user)["code"] == "USER_NOT_FOUND"
    assert not_a_member.status_code == 404
    assert error(not_a_member)["code"] == "USER_NOT_FOUND"
    assert unknown_project.status_code == 404
    assert error(unknown_project)["code"] == "PROJECT_NOT_FOUND"


def test_bad_project_member_and_account_bodies_are_clear_400s(team: dict[str, Session]) -> None:
    ada, csrf = team["ada"]

    cases = {
        "name": ada.post("/v1/projects", json={"name": "no spaces"}, headers=csrf),
        "role": _put(team["ada"], "bob@example.com", "superuser"),
        "email": ada.post("/v1/users/accounts", json={"email": "not-an-address"}, headers=csrf),
        "password": ada.post(
            "/v1/users/accounts", json={"email": "z@example.com", "password": "short"}, headers=csrf
        ),
    }
    duplicate = ada.post("/v1/users/accounts", json={"email": "BOB@example.com"}, headers=csrf)

    for field, response in cases.items():
        assert response.status_code == 400, response.text
        assert error(response)["code"] == "VALIDATION_ERROR"
        assert error(response)["details"]["field"] == field
    assert duplicate.status_code == 409
    assert error(duplicate)["code"] == "USER_ALREADY_EXISTS"


def test_a_cookie_write_without_the_csrf_token_is_refused(team: dict[str, Session]) -> None:
    ada, _ = team["ada"]

    response = ada.put("/v1/projects/team/members/bob@example.com", json={"role": "member"})

    assert response.status_code == 403
    assert error(response)["details"]["reason"] == "csrf"
    assert [m["email"] for m in ada.get("/v1/projects/team/members").json()["data"]] == [
        ADMIN_EMAIL
    ]


def test_a_key_with_the_admin_scope_manages_members_of_its_own_project_but_no_admins(
    team: dict[str, Session],
) -> None:
    ada, _ = team["ada"]
    key = TestClient(ada.app, headers=DEFAULT_AUTH)  # a key made before scopes: every scope

    added = key.put("/v1/projects/default/members/bob@example.com", json={"role": "member"})
    listed = key.get("/v1/projects/default/members")
    admin = key.put("/v1/projects/default/members/bob@example.com", json={"role": "admin"})
    other_project = key.get("/v1/projects/team/members")

    assert added.status_code == 200, added.text
    assert {m["email"] for m in listed.json()["data"]} == {ADMIN_EMAIL, "bob@example.com"}
    assert admin.status_code == 403
    assert error(admin)["details"]["required_role"] == "owner"
    assert other_project.status_code == 404
    assert error(other_project)["code"] == "PROJECT_NOT_FOUND"
