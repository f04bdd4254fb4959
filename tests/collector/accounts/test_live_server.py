"""Accounts and access end to end on a live collector (uvicorn on a real socket, real chDB):
sign-in sets the cookie with its flags, a viewer reads but is refused a write, a cookie write
without its CSRF token is refused, an admin makes a key scoped to ingest that can do nothing
else, the audit log names who made it, and sign-out ends the session (issue 51, "Done when").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from promptrail.collector.access.principal import SESSION_COOKIE
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import serve
from tests.collector.accounts.steps import ADMIN_EMAIL, ADMIN_PASSWORD, PASSWORD
from tests.collector.contract import assert_error

RECORD = {"model": "gpt-4o-mini", "input": "hi", "output": {"content": "hello"}}


@pytest.fixture
def live(admin_settings: Settings) -> Iterator[str]:
    """The collector's address, served on a real socket."""
    with serve(create_app(admin_settings)) as url:
        yield url


def signed_in(url: str, email: str, password: str) -> tuple[httpx.Client, dict[str, str]]:
    """A browser of the live collector signed in as ``email``, and its CSRF header."""
    browser = httpx.Client(base_url=url)
    answer = browser.post("/v1/auth/login", json={"email": email, "password": password})
    assert answer.status_code == 200, answer.text
    flags = answer.headers["set-cookie"].lower()
    assert flags.startswith(f"{SESSION_COOKIE}=")
    assert "httponly" in flags and "samesite=lax" in flags and "secure" not in flags  # http
    return browser, {"X-CSRF-Token": answer.json()["data"]["csrf_token"]}


def data(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()["data"]


def test_sign_in_roles_csrf_scoped_keys_audit_and_sign_out_over_a_socket(live: str) -> None:
    admin, admin_csrf = signed_in(live, ADMIN_EMAIL, ADMIN_PASSWORD)
    user = {"email": "vic@example.com", "password": PASSWORD}
    data(admin.post("/v1/users/accounts", json=user, headers=admin_csrf), 201)
    role = {"role": "viewer"}
    members = "/v1/projects/default/members/vic@example.com"
    data(admin.put(members, json=role, headers=admin_csrf))
    prompt = {"name": "greet", "template": "Hi", "model": "gpt-4o"}
    data(admin.post("/v1/prompts", json=prompt, headers=admin_csrf), 201)

    viewer, viewer_csrf = signed_in(live, "vic@example.com", PASSWORD)
    assert data(viewer.get("/v1/prompts/greet"))["name"] == "greet"
    refused = viewer.patch("/v1/prompts/greet", json={"template": "Yo"}, headers=viewer_csrf)
    details = assert_error(refused, 403, "FORBIDDEN", type_="permission_error")
    assert details["required_role"] == "member"
    no_token = admin.patch("/v1/prompts/greet", json={"template": "Yo"})
    assert assert_error(no_token, 403, "FORBIDDEN")["reason"] == "csrf"

    scopes = {"scopes": ["ingest"], "name": "web app"}
    made = data(admin.post("/v1/keys", json=scopes, headers=admin_csrf), 201)
    key = {"Authorization": f"Bearer {made['api_key']}"}
    with httpx.Client(base_url=live, headers=key) as app:
        assert app.post("/v1/requests", json=RECORD).status_code in (200, 201, 202)
        for method, path in (("GET", "/v1/requests"), ("GET", "/v1/prompts/greet")):
            refused = app.request(method, path)
            assert_error(refused, 403, "INSUFFICIENT_SCOPE", type_="permission_error")

    entries = data(admin.get("/v1/audit", params={"resource_type": "key"}))
    (entry,) = entries
    assert entry["action"] == "key.create"
    assert entry["actor"]["email"] == ADMIN_EMAIL and entry["role"] == "owner"
    assert made["api_key"] not in str(entry)

    data(viewer.post("/v1/auth/logout", headers=viewer_csrf))
    assert viewer.get("/v1/prompts").status_code == 401
    viewer.close()
    admin.close()
