"""Steps the accounts tests share: signing in and writing with the session's CSRF token."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

ADMIN_EMAIL = "ada@example.com"
ADMIN_PASSWORD = "correct horse battery staple"
PASSWORD = "a long enough password"


def sign_in(client: TestClient, email: str, password: str = PASSWORD) -> dict[str, str]:
    """Sign ``client`` in; return the headers its writes send (the CSRF token)."""
    response = client.post("/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    return {"X-CSRF-Token": response.json()["data"]["csrf_token"]}


def browser_of(client: TestClient) -> TestClient:
    """Another browser (a cookie jar of its own) of the app ``client`` serves."""
    return TestClient(client.app, base_url=str(client.base_url))


def make_user(admin: TestClient, csrf: dict[str, str], email: str, **fields: Any) -> dict[str, Any]:
    """Create a user as the signed-in instance admin ``admin``; return it."""
    body = {"email": email, "password": PASSWORD, **fields}
    response = admin.post("/v1/users/accounts", json=body, headers=csrf)
    assert response.status_code == 201, response.text
    user: dict[str, Any] = response.json()["data"]
    return user


def error(response: Any) -> dict[str, Any]:
    """The error object of a failed answer."""
    body: dict[str, Any] = response.json()["error"]
    return body
