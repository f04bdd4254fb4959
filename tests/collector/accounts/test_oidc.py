"""Sign-in with OpenID Connect against a real provider (django-oidc-provider in a process of its
own): the user made on its first sign-in with its groups' roles, a role set by hand kept over
the mapping, and every refusal a 403 that starts no session."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import RSAKey
from pydantic import SecretStr

from promptrail.collector.access.principal import SESSION_COOKIE
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.sso.flow_state import FLOW_COOKIE
from promptrail.collector.services.sso.provider import (
    JWKS_REFRESH_SECONDS,
    Provider,
    TokenRejected,
)
from tests.collector.accounts.oidc_provider import CLIENT_ID, CLIENT_SECRET, HS256_CLIENT_ID
from tests.collector.accounts.oidc_steps import (
    IdP,
    authorize,
    flow_of,
    reseal,
    running_provider,
    session_cookie_set,
    sign_in_with_sso,
    start_sign_in,
)
from tests.collector.accounts.steps import ADMIN_EMAIL, ADMIN_PASSWORD, error, sign_in

ROLE_MAP = {
    "eng": "default:member",
    "leads": "default:admin",
    "ml": "research:viewer",
    "ml-leads": "research:member",
    "ghosts": "nowhere:member",
}


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdP]:
    """The provider, for the module (each test signs in its own people)."""
    with running_provider(tmp_path_factory.mktemp("idp")) as provider:
        yield provider


def _sso_settings(settings: Settings, idp: IdP, **changes: Any) -> Settings:
    return settings.model_copy(
        update={
            "oidc_issuer": idp.issuer,
            "oidc_client_id": CLIENT_ID,
            "oidc_client_secret": SecretStr(CLIENT_SECRET),
            "oidc_role_map": ROLE_MAP,
            "oidc_allowed_domains": "example.com, Example.org",
            "oidc_scopes": "openid email profile groups",
            **changes,
        }
    )


@pytest.fixture
def sso_settings(admin_settings: Settings, idp: IdP) -> Settings:
    """Settings of a collector whose people sign in through ``idp``."""
    return _sso_settings(admin_settings, idp)


@pytest.fixture
def sso(sso_settings: Settings) -> Iterator[TestClient]:
    """A browser of that collector (its instance admin made at start-up, owner of default)."""
    with TestClient(create_app(sso_settings)) as client:
        yield client


@pytest.fixture
def admin(sso: TestClient) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The instance admin's own browser, signed in with its password; and its CSRF header."""
    with TestClient(sso.app, base_url=str(sso.base_url)) as client:
        csrf = sign_in(client, ADMIN_EMAIL, ADMIN_PASSWORD)
        assert (
            client.post("/v1/projects", json={"name": "research"}, headers=csrf).status_code == 201
        )
        yield client, csrf


def _roles(browser: TestClient) -> dict[str, str]:
    me = browser.get("/v1/auth/me")
    assert me.status_code == 200, me.text
    return {p["name"]: p["role"] for p in me.json()["data"]["projects"]}


def _members(admin: TestClient, project: str) -> dict[str, tuple[str, str]]:
    listed = admin.get(f"/v1/projects/{project}/members").json()["data"]
    return {m["email"]: (m["role"], m["role_source"]) for m in listed}


def test_the_login_sends_the_browser_to_the_issuer_with_pkce_state_and_nonce(
    sso: TestClient, idp: IdP
) -> None:
    location = start_sign_in(sso)

    url = urlsplit(location)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{idp.issuer}/authorize"
    assert query["response_type"] == "code"
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == "http://testserver/v1/auth/oidc/callback"
    assert query["scope"] == "openid email profile groups"
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert len(query["state"]) >= 32 and len(query["nonce"]) >= 32
    # The verifier never leaves the collector in the URL; the browser keeps the flow in an
    # HttpOnly cookie scoped to the SSO routes.
    flow = flow_of(sso)
    assert flow.state == query["state"] and flow.nonce == query["nonce"]
    assert flow.code_verifier not in location
    # A second login is a new flow.
    assert parse_qs(urlsplit(start_sign_in(sso)).query)["state"][0] != query["state"]


def test_a_first_sign_in_makes_the_user_with_its_groups_roles_and_a_session(
    sso: TestClient, admin: tuple[TestClient, dict[str, str]], idp: IdP
) -> None:
    idp.set_user("grace", "Grace@Example.com", ["eng", "ml", "unmapped", "ghosts"], name="Grace H")

    callback = sign_in_with_sso(sso, "grace")

    assert callback.status_code == 302, callback.text
    assert callback.headers["location"] == "/"
    cookies = callback.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith(f"{SESSION_COOKIE}="))
    assert "HttpOnly" in session and "SameSite=lax" in session and "Path=/" in session
    assert any(c.startswith(f'{FLOW_COOKIE}="";') or "Max-Age=0" in c for c in cookies)
    me = sso.get("/v1/auth/me").json()["data"]
    assert me["user"]["email"] == "Grace@Example.com"
    assert me["user"]["name"] == "Grace H"
    assert me["user"]["instance_admin"] is False
    assert me["user"]["last_login_at"] is not None
    # eng -> default:member, ml -> research:viewer; a group without a mapping gives nothing
    # and a mapped project that does not exist is not made.
    assert _roles(sso) == {"default": "member", "research": "viewer"}
    assert _members(admin[0], "default")["Grace@Example.com"] == ("member", "sso")
    assert admin[0].get("/v1/projects/nowhere/members").status_code == 404
    # The session is the password sign-in's: its CSRF token lets it write.
    csrf = {"X-CSRF-Token": me["csrf_token"]}
    made = sso.post(
        "/v1/prompts", json={"name": "by-grace", "template": "Hi", "model": "m"}, headers=csrf
    )
    assert made.status_code == 201, made.text


def test_a_role_set_by_hand_stays_and_a_group_removed_at_the_provider_removes_only_sso_roles(
    sso: TestClient, admin: tuple[TestClient, dict[str, str]], idp: IdP
) -> None:
    admin_browser, csrf = admin
    idp.set_user("hedy", "hedy@example.com", ["eng", "ml"])
    assert sign_in_with_sso(sso, "hedy").status_code == 302
    changed = admin_browser.put(
        "/v1/projects/default/members/hedy@example.com", json={"role": "viewer"}, headers=csrf
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["data"]["role_source"] == "manual"

    # At the provider: out of eng and ml, into leads (default:admin).
    idp.set_user("hedy", "hedy@example.com", ["leads"])
    again = sign_in_with_sso(sso, "hedy")

    assert again.status_code == 302, again.text
    # default keeps the admin's viewer over the groups' admin; research, given by ml only, goes.
    assert _roles(sso) == {"default": "viewer"}
    assert _members(admin_browser, "default")["hedy@example.com"] == ("viewer", "manual")
    assert "hedy@example.com" not in _members(admin_browser, "research")

    # Back into ml-leads: research comes back with the strongest role its groups give.
    idp.set_user("hedy", "hedy@example.com", ["ml", "ml-leads"])
    assert sign_in_with_sso(sso, "hedy").status_code == 302
    assert _roles(sso) == {"default": "viewer", "research": "member"}
    assert _members(admin_browser, "research")["hedy@example.com"] == ("member", "sso")


def test_an_sso_sign_in_of_an_existing_user_keeps_its_account_and_roles(
    sso: TestClient, admin: tuple[TestClient, dict[str, str]], idp: IdP
) -> None:
    idp.set_user("ada", ADMIN_EMAIL.upper(), ["eng"])
    before = admin[0].get("/v1/auth/me").json()["data"]["user"]

    assert sign_in_with_sso(sso, "ada").status_code == 302

    me = sso.get("/v1/auth/me").json()["data"]
    assert me["user"]["id"] == before["id"] and me["user"]["instance_admin"] is True
    # Owner of default by hand (the first instance admin): eng's member does not demote it.
    assert _roles(sso) == {"default": "owner", "research": "owner"}


@pytest.mark.parametrize(
    ("email", "verified", "reason"),
    [
        ("mallory@evil.test", True, "domain"),
        ("mallory@sub.example.com", True, "domain"),
        ("mallory@example.com", False, "email"),
    ],
)
def test_an_address_not_allowed_or_not_verified_is_403_with_no_session_and_no_user(
    sso: TestClient,
    admin: tuple[TestClient, dict[str, str]],
    idp: IdP,
    email: str,
    verified: bool,
    reason: str,
) -> None:
    idp.set_user("mallory", email, ["leads"], email_verified=verified)

    callback = sign_in_with_sso(sso, "mallory")

    assert callback.status_code == 403
    assert error(callback)["code"] == "FORBIDDEN"
    assert error(callback)["type"] == "permission_error"
    assert error(callback)["details"]["reason"] == reason
    assert not session_cookie_set(callback)
    assert SESSION_COOKIE not in sso.cookies
    assert sso.get("/v1/auth/me").status_code == 401
    users = admin[0].get("/v1/users/accounts").json()["data"]
    assert email not in [u["email"] for u in users]


def test_an_allowed_domain_matches_in_any_case(sso: TestClient, idp: IdP) -> None:
    idp.set_user("linus", "linus@EXAMPLE.ORG", ["eng"])

    assert sign_in_with_sso(sso, "linus").status_code == 302
    assert _roles(sso) == {"default": "member"}


def test_a_tampered_or_replayed_state_is_403_and_the_genuine_one_signs_in_once(
    sso: TestClient, idp: IdP
) -> None:
    idp.set_user("ken", "ken@example.com", ["eng"])
    callback = authorize(start_sign_in(sso), "ken")
    state = parse_qs(urlsplit(callback).query)["state"][0]

    tampered = sso.get(callback.replace(state, state[:-2] + "xx"), follow_redirects=False)
    flow_cookie = sso.cookies[FLOW_COOKIE]
    genuine = sso.get(callback, follow_redirects=False)
    sso.cookies.set(FLOW_COOKIE, flow_cookie, domain="testserver.local", path="/v1/auth/oidc")
    replayed = sso.get(callback, follow_redirects=False)

    assert tampered.status_code == 403, tampered.text
    assert error(tampered)["details"]["reason"] == "state"
    assert not session_cookie_set(tampered)
    assert genuine.status_code == 302, genuine.text
    assert replayed.status_code == 403
    assert error(replayed)["details"]["reason"] == "state"
    assert not session_cookie_set(replayed)


def test_a_callback_without_the_browsers_flow_cookie_is_403(sso: TestClient, idp: IdP) -> None:
    idp.set_user("eve", "eve@example.com", ["leads"])
    # The attacker's own authorization, finished in the victim's browser (login CSRF).
    callback = authorize(start_sign_in(sso), "eve")
    victim = TestClient(sso.app, base_url=str(sso.base_url))

    answer = victim.get(callback, follow_redirects=False)

    assert answer.status_code == 403
    assert error(answer)["details"]["reason"] == "state"
    assert not session_cookie_set(answer)


def test_the_provider_checks_the_pkce_verifier_the_exchange_sends(
    sso: TestClient, idp: IdP
) -> None:
    idp.set_user("barbara", "barbara@example.com", ["eng"])
    callback = authorize(start_sign_in(sso), "barbara")
    flow = flow_of(sso)
    # Same state and nonce, another verifier: the provider refuses the exchange.
    reseal(sso, replace(flow, code_verifier=flow.code_verifier[::-1]))

    answer = sso.get(callback, follow_redirects=False)

    assert answer.status_code == 403, answer.text
    assert error(answer)["details"]["reason"] == "token"
    assert not session_cookie_set(answer)


def test_an_id_token_for_another_nonce_is_403(sso: TestClient, idp: IdP) -> None:
    idp.set_user("frances", "frances@example.com", ["eng"])
    callback = authorize(start_sign_in(sso), "frances")
    reseal(sso, replace(flow_of(sso), nonce="a-nonce-this-sign-in-never-sent"))

    answer = sso.get(callback, follow_redirects=False)

    assert answer.status_code == 403
    assert error(answer)["details"]["reason"] == "token"
    assert "nonce" in error(answer)["message"]
    assert not session_cookie_set(answer)


def test_an_id_token_the_provider_signs_with_the_client_secret_is_403(
    admin_settings: Settings, idp: IdP
) -> None:
    # The provider's HS256 client: a token any holder of the secret could have made.
    settings = _sso_settings(admin_settings, idp, oidc_client_id=HS256_CLIENT_ID)
    idp.set_user("margaret", "margaret@example.com", ["eng"])
    with TestClient(create_app(settings)) as browser:
        answer = sign_in_with_sso(browser, "margaret")

        assert answer.status_code == 403, answer.text
        assert error(answer)["details"]["reason"] == "token"
        assert not session_cookie_set(answer)
        assert browser.get("/v1/auth/me").status_code == 401


def test_claims_only_in_userinfo_are_read_from_it(admin_settings: Settings, tmp_path: Path) -> None:
    with running_provider(tmp_path / "idp", "--claims-in-userinfo-only") as plain:
        settings = _sso_settings(admin_settings, plain)
        plain.set_user("katherine", "katherine@example.com", ["ml"])
        with TestClient(create_app(settings)) as browser:
            browser.post("/v1/auth/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD})
            csrf = {"X-CSRF-Token": browser.get("/v1/auth/me").json()["data"]["csrf_token"]}
            assert browser.post("/v1/projects", json={"name": "research"}, headers=csrf).is_success
            browser.post("/v1/auth/logout", headers=csrf)

            answer = sign_in_with_sso(browser, "katherine")

            assert answer.status_code == 302, answer.text
            assert _roles(browser) == {"research": "viewer"}


def test_a_disabled_user_is_403(
    sso: TestClient, admin: tuple[TestClient, dict[str, str]], idp: IdP
) -> None:
    admin_browser, csrf = admin
    idp.set_user("alan", "alan@example.com", ["eng"])
    assert sign_in_with_sso(sso, "alan").status_code == 302
    disabled = admin_browser.patch(
        "/v1/users/accounts/alan@example.com", json={"disabled": True}, headers=csrf
    )
    assert disabled.status_code == 200, disabled.text

    answer = sign_in_with_sso(sso, "alan")

    assert answer.status_code == 403
    assert error(answer)["details"]["reason"] == "disabled"
    assert not session_cookie_set(answer)


def test_the_public_url_names_the_callback_and_makes_the_cookies_secure(
    admin_settings: Settings, idp: IdP
) -> None:
    settings = _sso_settings(admin_settings, idp, public_url="https://promptrail.example/")
    with TestClient(create_app(settings)) as browser:
        response = browser.get("/v1/auth/oidc/login", follow_redirects=False)

    query = parse_qs(urlsplit(response.headers["location"]).query)
    assert query["redirect_uri"] == ["https://promptrail.example/v1/auth/oidc/callback"]
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{FLOW_COOKIE}=")
    assert "Secure" in cookie and "HttpOnly" in cookie and "Path=/v1/auth/oidc" in cookie


def test_without_sso_settings_the_sso_routes_are_404(browser: TestClient) -> None:
    for path in ("/v1/auth/oidc/login", "/v1/auth/oidc/callback?state=s&code=c"):
        answer = browser.get(path, follow_redirects=False)

        assert answer.status_code == 404
        assert error(answer)["code"] == "NOT_FOUND"
        assert "PROMPTRAIL_OIDC_ISSUER" in error(answer)["message"]


def test_an_unreachable_provider_is_403_at_login(admin_settings: Settings, idp: IdP) -> None:
    settings = _sso_settings(admin_settings, idp, oidc_issuer="http://127.0.0.1:9/openid")
    with TestClient(create_app(settings)) as browser:
        answer = browser.get("/v1/auth/oidc/login", follow_redirects=False)

    assert answer.status_code == 403
    assert error(answer)["details"]["reason"] == "provider"


# The ID token check itself, with tokens signed here: the provider's own key (read from its
# database) for a valid token, and each claim or the key changed one at a time.


def _claims(idp: IdP, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": idp.issuer,
        "sub": "42",
        "aud": CLIENT_ID,
        "exp": now + 300,
        "iat": now,
        "nonce": "the-nonce",
        **changes,
    }
    return {k: v for k, v in claims.items() if v is not None}


def _signed(idp: IdP, claims: dict[str, Any], key: RSAKey | None = None) -> str:
    pem, kid = idp.signing_key_pem()
    own = RSAKey.import_key(pem)
    return jwt.encode({"alg": "RS256", "kid": kid}, claims, key or own)


def test_the_id_token_check_accepts_the_providers_token(idp: IdP) -> None:
    provider = Provider(idp.issuer, CLIENT_ID)

    claims = provider.check_id_token(_signed(idp, _claims(idp)), "the-nonce")

    assert claims["sub"] == "42"


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"nonce": "another-nonce"}, "nonce"),
        ({"nonce": None}, "nonce"),
        ({"aud": "another-client"}, "aud"),
        ({"aud": [CLIENT_ID, "another-client"]}, "azp"),
        ({"iss": "http://127.0.0.1:1/openid"}, "iss"),
        ({"exp": int(time.time()) - 120}, "expired"),
        ({"sub": None}, "sub"),
    ],
)
def test_the_id_token_check_refuses_a_wrong_claim(
    idp: IdP, changes: dict[str, Any], named: str
) -> None:
    provider = Provider(idp.issuer, CLIENT_ID)

    with pytest.raises(TokenRejected, match=named):
        provider.check_id_token(_signed(idp, _claims(idp, **changes)), "the-nonce")


def test_the_id_token_check_allows_a_minute_of_clock_skew(idp: IdP) -> None:
    provider = Provider(idp.issuer, CLIENT_ID)
    token = _signed(idp, _claims(idp, exp=int(time.time()) - 30))

    assert provider.check_id_token(token, "the-nonce")["sub"] == "42"


def test_the_id_token_check_refuses_another_key_and_unsigned_tokens(idp: IdP) -> None:
    provider = Provider(idp.issuer, CLIENT_ID)
    stranger = RSAKey.generate_key(2048)
    _, kid = idp.signing_key_pem()
    payload = base64.urlsafe_b64encode(json.dumps(_claims(idp)).encode()).rstrip(b"=").decode()

    with pytest.raises(TokenRejected, match="signature"):
        provider.check_id_token(_signed(idp, _claims(idp), stranger), "the-nonce")
    with pytest.raises(TokenRejected, match="kid"):
        provider.check_id_token(
            jwt.encode({"alg": "RS256", "kid": "not-the-providers"}, _claims(idp), stranger),
            "the-nonce",
        )
    with pytest.raises(TokenRejected, match="none"):
        provider.check_id_token(f"eyJhbGciOiJub25lIn0.{payload}.", "the-nonce")
    assert kid


def test_a_rotated_provider_key_is_fetched_again_but_not_on_every_unknown_key_id(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    with running_provider(tmp_path / "idp") as rotating:
        provider = Provider(rotating.issuer, CLIENT_ID, clock=lambda: now[0])
        assert provider.check_id_token(_signed(rotating, _claims(rotating)), "the-nonce")
        new_kid = rotating.rotate_key()
        token = _signed(rotating, _claims(rotating))
        header = token.split(".")[0]
        assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"] == (
            new_kid
        )

        # The keys were read a moment ago: an unknown key id does not read them again yet.
        with pytest.raises(TokenRejected, match="kid"):
            provider.check_id_token(token, "the-nonce")
        now[0] += JWKS_REFRESH_SECONDS
        claims = provider.check_id_token(token, "the-nonce")

    assert claims["iss"] == rotating.issuer
