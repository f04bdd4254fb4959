"""Fixtures of the audit tests: browsers signed in with a role in project default."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.access.principal import SESSION_COOKIE, Role
from promptrail.collector.services.accounts.members import Actor
from tests.collector.audit.steps import PASSWORD, SignIn


@pytest.fixture
def sign_in(api: TestClient) -> SignIn:
    """A browser signed in as ``<role>@example.com`` holding ``role`` in project default: its
    client (the session cookie set) and the CSRF header its writes send."""
    accounts = api.app.state.services.accounts  # type: ignore[attr-defined]
    # The first instance admin owns the projects without members (default, of the test key).
    accounts.create_user("owner@example.com", PASSWORD, instance_admin=True)

    def as_role(role: Role) -> tuple[TestClient, dict[str, str]]:
        email = f"{role}@example.com"
        if role != "owner":
            accounts.create_user(email, PASSWORD)
            accounts.members.put("default", email, role, Actor(role="owner"))
        session = accounts.sessions.sign_in(email, PASSWORD)
        browser = TestClient(api.app, cookies={SESSION_COOKIE: session.token})
        return browser, {"X-CSRF-Token": session.signed_in.csrf_token}

    return as_role
