"""Signed-in users act by their role in the project (issue 51 point 2; docs/security.md, "Roles and
scopes"): a viewer reads, an annotator reads records and writes scores, a member writes but not
an admin's part, a cookie write needs its CSRF token, and another project is not found.

The users, members and sessions are the accounts service's own, on the real store; the requests
go over HTTP (ASGI transport) with the session cookie as a browser sends it.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.access.principal import SESSION_COOKIE
from tests.collector.access.steps import PROMPT, SignIn
from tests.collector.contract import assert_error

RECORD = {"model": "gpt-4o-mini", "input": "hi", "output": {"content": "hello"}}


def refused_for_role(response: Any, required_role: str) -> None:
    details = assert_error(response, 403, "FORBIDDEN", type_="permission_error")
    assert details["required_role"] == required_role


def test_a_viewer_reads_everything_and_writes_nothing(sign_in: SignIn) -> None:
    viewer, csrf = sign_in("viewer")

    for path in ("/v1/prompts", "/v1/prompts/greet", "/v1/requests", "/v1/experiments"):
        assert viewer.get(path).status_code == 200, path
    refused_for_role(viewer.post("/v1/prompts", json=PROMPT, headers=csrf), "member")
    refused_for_role(
        viewer.put("/v1/prompts/greet/labels/staging", json={"version": 1}, headers=csrf),
        "member",
    )
    refused_for_role(viewer.post("/v1/scores", json={}, headers=csrf), "annotator")
    refused_for_role(viewer.get("/v1/keys"), "admin")
    # A refusal comes before the body is judged: a viewer learns nothing of a valid body.
    refused_for_role(viewer.post("/v1/prompts", content=b"{not json", headers=csrf), "member")


def test_an_annotator_reads_records_and_writes_scores_but_not_prompts(
    api: TestClient, sign_in: SignIn
) -> None:
    logged = api.post("/v1/requests", json=RECORD)
    assert logged.is_success, logged.text
    request_id = logged.json()["data"]["id"]
    annotator, csrf = sign_in("annotator")

    # The environments are the record lists' picker: reading records includes them.
    for path in (
        "/v1/requests",
        "/v1/traces",
        "/v1/sessions",
        "/v1/datasets",
        "/v1/scores",
        "/v1/environments",
    ):
        assert annotator.get(path).status_code == 200, path
    score = {"name": "helpful", "value": 1, "request_id": request_id}
    scored = annotator.post("/v1/scores", json=score, headers=csrf)
    assert scored.status_code == 201, scored.text
    refused_for_role(annotator.get("/v1/prompts/greet"), "viewer")
    # Not a prompt's connection either (its name and provider are a viewer's read).
    refused_for_role(annotator.get("/v1/connections/openai"), "viewer")
    refused_for_role(annotator.post("/v1/prompts", json=PROMPT, headers=csrf), "member")


def test_a_member_writes_but_not_an_admins_part(api: TestClient, sign_in: SignIn) -> None:
    member, csrf = sign_in("member")

    made = member.post("/v1/prompts", json={**PROMPT, "name": "other"}, headers=csrf)
    assert made.status_code == 201, made.text
    moved = member.put("/v1/prompts/greet/labels/staging", json={"version": 1}, headers=csrf)
    assert moved.status_code == 200, moved.text
    # Privilege escalation: a key of its own, deleting the log, reading the keys.
    refused_for_role(member.post("/v1/keys", json={"scopes": ["admin"]}, headers=csrf), "admin")
    refused_for_role(member.get("/v1/keys"), "admin")
    refused_for_role(
        member.request("DELETE", "/v1/requests", json={"metadata": {"a": "b"}}, headers=csrf),
        "admin",
    )
    assert len(api.get("/v1/keys").json()["data"]) == 1


def test_an_admin_makes_keys_it_is_named_on(sign_in: SignIn) -> None:
    admin, csrf = sign_in("admin")

    made = admin.post("/v1/keys", json={"scopes": ["ingest", "prompts:read"]}, headers=csrf)

    assert made.status_code == 201, made.text
    key = made.json()["data"]
    listed = {k["key_id"]: k for k in admin.get("/v1/keys").json()["data"]}
    assert listed[key["key_id"]]["created_by"] == "admin@example.com"
    assert listed[key["key_id"]]["scopes"] == ["ingest", "prompts:read"]


def test_a_cookie_write_needs_the_session_csrf_token(sign_in: SignIn) -> None:
    member, csrf = sign_in("member")
    _, someone_elses = sign_in("admin")

    for headers in ({}, {"X-CSRF-Token": "forged"}, someone_elses):
        refused = member.post("/v1/prompts", json={**PROMPT, "name": "x"}, headers=headers)
        details = assert_error(refused, 403, "FORBIDDEN", type_="permission_error")
        assert details["reason"] == "csrf"
    assert member.get("/v1/prompts/x").status_code == 404  # nothing was made
    # Reads need no token; a write with it goes through.
    assert member.get("/v1/prompts").status_code == 200
    made = member.post("/v1/prompts", json={**PROMPT, "name": "x"}, headers=csrf)
    assert made.status_code == 201, made.text


def test_a_user_acts_only_in_its_own_projects(sign_in: SignIn) -> None:
    member, _ = sign_in("member")

    # No header: the user's first project.
    assert [p["name"] for p in member.get("/v1/prompts").json()["data"]] == ["greet"]
    named = member.get("/v1/prompts", headers={"X-Promptrail-Project": "default"})
    assert named.status_code == 200
    for project in ("elsewhere", "Default", ""):
        refused = member.get("/v1/prompts", headers={"X-Promptrail-Project": project})
        assert_error(refused, 404, "PROJECT_NOT_FOUND", type_="not_found_error")


def test_an_ended_session_is_refused(api: TestClient, sign_in: SignIn) -> None:
    member, _ = sign_in("member")
    token = member.cookies[SESSION_COOKIE]
    assert member.get("/v1/prompts").status_code == 200

    api.app.state.services.accounts.sessions.sign_out(token)  # type: ignore[attr-defined]

    assert_error(member.get("/v1/prompts"), 401, "INVALID_API_KEY", type_="authentication_error")
    stranger = TestClient(api.app, cookies={SESSION_COOKIE: "made-up"})
    assert_error(stranger.get("/v1/prompts"), 401, "INVALID_API_KEY")
