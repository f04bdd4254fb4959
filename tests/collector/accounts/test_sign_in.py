"""Sign-in with e-mail and password: the cookie, /me, sign-out, failures and their limit."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.access.principal import SESSION_COOKIE
from promptrail.collector.services.accounts.login_limits import LoginLimits
from promptrail.collector.services.container import Services
from tests.collector.accounts.steps import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    PASSWORD,
    browser_of,
    error,
    make_user,
    sign_in,
)


def _services(client: TestClient) -> Services:
    services: Services = client.app.state.services  # type: ignore[attr-defined]
    return services


def _login(client: TestClient, email: str, password: str) -> Any:
    return client.post("/v1/auth/login", json={"email": email, "password": password})


def test_sign_in_sets_a_server_side_session_cookie_and_me_answers_the_same(
    browser: TestClient,
) -> None:
    # Any case of the address signs in.
    response = _login(browser, ADMIN_EMAIL.upper(), ADMIN_PASSWORD)
    me = browser.get("/v1/auth/me")

    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
    # Served over http: a Secure cookie would never come back.
    assert "Secure" not in cookie
    data = response.json()["data"]
    assert data["user"]["email"] == ADMIN_EMAIL
    assert data["user"]["instance_admin"] is True
    assert data["user"]["last_login_at"] is not None
    # The first instance admin owns the project the development key made.
    assert data["projects"] == [{"name": "default", "role": "owner"}]
    assert len(data["csrf_token"]) >= 32
    assert me.status_code == 200
    assert me.json()["data"]["user"]["id"] == data["user"]["id"]
    assert me.json()["data"]["projects"] == data["projects"]
    assert me.json()["data"]["csrf_token"] == data["csrf_token"]
    # The token is the cookie's only: neither the body nor the store holds it.
    token = browser.cookies[SESSION_COOKIE]
    assert token not in response.text


def test_the_cookie_is_secure_over_https(browser: TestClient) -> None:
    secure = TestClient(browser.app, base_url="https://testserver")

    response = _login(secure, ADMIN_EMAIL, ADMIN_PASSWORD)

    assert response.status_code == 200
    assert "Secure" in response.headers["set-cookie"]
    assert secure.get("/v1/auth/me").status_code == 200


def test_a_wrong_password_and_an_unknown_email_get_the_same_answer(browser: TestClient) -> None:
    wrong = _login(browser, ADMIN_EMAIL, "not the password at all")
    unknown = _login(browser, "nobody@example.com", ADMIN_PASSWORD)
    no_session = browser.get("/v1/auth/me")

    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert error(wrong)["code"] == "INVALID_CREDENTIALS"
    assert error(wrong)["type"] == "authentication_error"
    assert SESSION_COOKIE not in browser.cookies
    assert no_session.status_code == 401
    assert error(no_session)["code"] == "INVALID_CREDENTIALS"


def test_the_eleventh_attempt_within_a_minute_is_refused_even_with_the_right_password(
    browser: TestClient,
) -> None:
    clock = [1000.0]
    _services(browser).accounts.sessions.limits = LoginLimits(clock=lambda: clock[0])

    failures = [_login(browser, ADMIN_EMAIL, f"wrong password {i}").status_code for i in range(10)]
    clock[0] += 30
    refused = _login(browser, ADMIN_EMAIL.upper(), ADMIN_PASSWORD)
    other = _login(browser, "someone@example.com", "whatever it is")
    clock[0] += 31  # the first failure is a minute old
    admitted = _login(browser, ADMIN_EMAIL, ADMIN_PASSWORD)

    assert failures == [401] * 10
    assert refused.status_code == 429
    assert error(refused)["code"] == "RATE_LIMITED"
    assert error(refused)["type"] == "rate_limit_error"
    assert refused.headers["retry-after"] == "30"
    assert SESSION_COOKIE not in refused.cookies
    # The limit is the address's alone.
    assert other.status_code == 401
    assert admitted.status_code == 200


def test_sign_out_ends_the_session_at_once_and_needs_the_csrf_token(browser: TestClient) -> None:
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    token = browser.cookies[SESSION_COOKIE]

    forged = browser.post("/v1/auth/logout")
    still_in = browser.get("/v1/auth/me").status_code
    logout = browser.post("/v1/auth/logout", headers=csrf)
    after = browser.get("/v1/auth/me")
    replay = browser_of(browser)
    replay.cookies.set(SESSION_COOKIE, token)
    replayed = replay.get("/v1/auth/me")

    assert forged.status_code == 403
    assert error(forged)["code"] == "FORBIDDEN"
    assert error(forged)["details"]["reason"] == "csrf"
    assert still_in == 200
    assert logout.status_code == 200
    assert logout.json() == {"data": {"signed_out": True}}
    assert SESSION_COOKIE not in browser.cookies
    # Ended server-side: the old cookie sent again is refused.
    assert after.status_code == 401
    assert replayed.status_code == 401


def test_disabling_a_user_or_a_new_password_ends_its_sessions_at_once(
    browser: TestClient,
) -> None:
    admin_csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    make_user(browser, admin_csrf, "bob@example.com", name="Bob")
    make_user(browser, admin_csrf, "carol@example.com")
    bob, carol = browser_of(browser), browser_of(browser)
    bob_csrf = sign_in(bob, "bob@example.com")
    sign_in(carol, "carol@example.com")
    before = [bob.get("/v1/auth/me").status_code, carol.get("/v1/auth/me").status_code]

    # Only an instance admin changes accounts.
    by_bob = bob.patch(
        "/v1/users/accounts/carol@example.com", json={"disabled": True}, headers=bob_csrf
    )
    disabled = browser.patch(
        "/v1/users/accounts/BOB@example.com", json={"disabled": True}, headers=admin_csrf
    )
    new_password = browser.patch(
        "/v1/users/accounts/carol@example.com",
        json={"password": "another long password"},
        headers=admin_csrf,
    )
    after = [bob.get("/v1/auth/me").status_code, carol.get("/v1/auth/me").status_code]
    bob_again = _login(bob, "bob@example.com", PASSWORD)
    carol_old = _login(carol, "carol@example.com", PASSWORD)
    carol_new = _login(carol, "carol@example.com", "another long password")

    assert before == [200, 200]
    assert by_bob.status_code == 403
    assert disabled.status_code == 200
    assert disabled.json()["data"]["disabled"] is True
    assert new_password.status_code == 200
    assert after == [401, 401]
    # A disabled user's right password gets the answer of a wrong one.
    assert bob_again.status_code == 401
    assert error(bob_again)["code"] == "INVALID_CREDENTIALS"
    assert carol_old.status_code == 401
    assert carol_new.status_code == 200


def test_password_hashes_are_argon2id_and_never_answered(browser: TestClient) -> None:
    csrf = sign_in(browser, ADMIN_EMAIL, ADMIN_PASSWORD)
    made = browser.post(
        "/v1/users/accounts", json={"email": "eve@example.com", "password": PASSWORD}, headers=csrf
    )
    answers = [made, browser.get("/v1/auth/me"), browser.get("/v1/users/accounts")]

    stored = _services(browser).accounts.users.get("eve@example.com").password_hash
    assert stored.startswith("$argon2id$")
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        assert "argon2" not in answer.text and "password" not in answer.text


def test_bad_sign_in_bodies_are_clear_400s(browser: TestClient) -> None:
    missing = browser.post("/v1/auth/login", json={"email": ADMIN_EMAIL})
    wrong_type = browser.post("/v1/auth/login", json={"email": 42, "password": ADMIN_PASSWORD})
    not_json = browser.post(
        "/v1/auth/login", content=b"{", headers={"content-type": "application/json"}
    )

    for response in (missing, wrong_type, not_json):
        assert response.status_code == 400, response.text
        assert error(response)["code"] == "VALIDATION_ERROR"
    assert "password" in str(error(missing)["details"])
    assert "email" in str(error(wrong_type)["details"])
