"""Session fixation (docs/security.md, "Threat model"): a sign-in always makes a new session, so
a cookie value planted in a browser before it signs in (an attacker's own live session, or a
made-up value) is never what the signed-in browser holds, and the planted value does not become
the victim's session. Real chDB, real HTTP (ASGI transport).
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.collector.access.principal import SESSION_COOKIE
from tests.collector.accounts.steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    browser_of,
    make_user,
    sign_in,
)


def test_signing_in_never_adopts_a_cookie_the_browser_already_held(browser: TestClient) -> None:
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    make_user(browser, csrf, "mallory@example.com")
    attacker = browser_of(browser)
    sign_in(attacker, "mallory@example.com")
    planted = attacker.cookies[SESSION_COOKIE]

    for value in (planted, "made-up-before-sign-in"):
        victim = TestClient(browser.app, cookies={SESSION_COOKIE: value})
        signed_in = victim.post(
            "/v1/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        )
        assert signed_in.status_code == 200, signed_in.text

        issued = signed_in.cookies[SESSION_COOKIE]
        assert issued != value
        fresh = TestClient(browser.app, cookies={SESSION_COOKIE: issued})
        assert fresh.get("/v1/auth/me").json()["data"]["user"]["email"] == ADMIN_EMAIL
        # The planted value signs in no one new: the attacker's stays the attacker's, a
        # made-up one stays no one's.
        kept = TestClient(browser.app, cookies={SESSION_COOKIE: value}).get("/v1/auth/me")
        if value == planted:
            assert kept.json()["data"]["user"]["email"] == "mallory@example.com"
        else:
            assert kept.status_code == 401, kept.text
    # The attacker's own session is still only the attacker's.
    assert attacker.get("/v1/auth/me").json()["data"]["user"]["email"] == "mallory@example.com"
