"""Privilege escalation by a signed-in user (issue 51, "Bad input and safety"; docs/security.md,
"Threat model"): a member cannot make itself an admin, an admin cannot make itself an owner,
neither makes itself an instance admin, and a member makes no key at all, not even a narrow one.
Each refusal is 403 FORBIDDEN naming the role it needed, and nothing changes.

The users, members and sessions are the accounts service's own, on the real store; the requests
go over HTTP (ASGI transport) with the session cookie and CSRF token a browser sends.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.collector.access.steps import SignIn
from tests.collector.contract import assert_error

MEMBERS = "/v1/projects/default/members"


def role_in_default(browser: TestClient) -> str:
    me = browser.get("/v1/auth/me")
    assert me.status_code == 200, me.text
    roles: dict[str, Any] = {p["name"]: p["role"] for p in me.json()["data"]["projects"]}
    role: str = roles["default"]
    return role


def needed(response: Any, role: str) -> None:
    details = assert_error(response, 403, "FORBIDDEN", type_="permission_error")
    assert details["required_role"] == role, details


def test_a_member_cannot_make_itself_an_admin_or_an_owner(sign_in: SignIn) -> None:
    member, csrf = sign_in("member")

    for role in ("admin", "owner"):
        needed(
            member.put(f"{MEMBERS}/member@example.com", json={"role": role}, headers=csrf), "admin"
        )
    needed(member.request("DELETE", f"{MEMBERS}/owner@example.com", headers=csrf), "admin")

    assert role_in_default(member) == "member"


def test_an_admin_cannot_make_itself_an_owner_nor_unseat_one(
    api: TestClient, sign_in: SignIn
) -> None:
    admin, csrf = sign_in("admin")

    needed(admin.put(f"{MEMBERS}/admin@example.com", json={"role": "owner"}, headers=csrf), "owner")
    needed(
        admin.put(f"{MEMBERS}/owner@example.com", json={"role": "member"}, headers=csrf), "owner"
    )
    needed(admin.request("DELETE", f"{MEMBERS}/owner@example.com", headers=csrf), "owner")

    assert role_in_default(admin) == "admin"
    roles = {m["email"]: m["role"] for m in admin.get(MEMBERS).json()["data"]}
    assert roles["owner@example.com"] == "owner"


def test_no_project_role_makes_a_user_an_instance_admin(sign_in: SignIn) -> None:
    admin, csrf = sign_in("admin")

    made = admin.post(
        "/v1/users/accounts",
        json={
            "email": "mine@example.com",
            "password": "a long enough password",
            "instance_admin": True,
        },
        headers=csrf,
    )
    needed(made, "instance_admin")
    own_account = admin.patch(
        "/v1/users/accounts/admin@example.com", json={"disabled": False}, headers=csrf
    )
    needed(own_account, "instance_admin")
    needed(admin.post("/v1/projects", json={"name": "mine"}, headers=csrf), "instance_admin")

    assert [p["name"] for p in admin.get("/v1/auth/me").json()["data"]["projects"]] == ["default"]


def test_a_member_makes_no_key_even_one_narrower_than_its_role(
    api: TestClient, sign_in: SignIn
) -> None:
    member, csrf = sign_in("member")

    for scopes in (["ingest"], ["ingest", "prompts:read"], ["admin"]):
        needed(member.post("/v1/keys", json={"scopes": scopes}, headers=csrf), "admin")

    assert len(api.get("/v1/keys").json()["data"]) == 1  # the development key alone
