"""Steps of the SSO tests: the provider in its own process, a person signing in on it, and the
collector's sign-in cookie opened and sealed again with a changed part."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from fastapi.testclient import TestClient

from promptrail.collector.services.sso.flow_state import FLOW_COOKIE, Flow, FlowSigner
from tests.collector.accounts.oidc_provider import CLIENT_SECRET, ISSUER_PATH

PROVIDER_PASSWORD = "the provider's own password"
REPO = Path(__file__).resolve().parents[3]
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass(frozen=True)
class IdP:
    """A running provider: its base URL, issuer and database."""

    url: str
    directory: Path

    @property
    def issuer(self) -> str:
        """The issuer its tokens and discovery name."""
        return self.url + ISSUER_PATH

    def set_user(
        self,
        username: str,
        email: str,
        groups: list[str],
        email_verified: bool | None = True,
        name: str = "",
    ) -> None:
        """Make or change a user of the provider (its groups, whether its address is verified)."""
        body = {
            "username": username,
            "password": PROVIDER_PASSWORD,
            "email": email,
            "groups": groups,
            "email_verified": email_verified,
            "name": name,
        }
        response = httpx.post(f"{self.url}/testing/users", json=body, timeout=30)
        assert response.status_code == 200, response.text

    def rotate_key(self) -> str:
        """Replace the provider's signing key by a new one; return the new key's id."""
        response = httpx.post(f"{self.url}/testing/rotate-key", timeout=60)
        assert response.status_code == 200, response.text
        return str(response.json()["kid"])

    def signing_key_pem(self) -> tuple[str, str]:
        """The provider's RSA private key (PEM) and its key id, read from its database."""
        with sqlite3.connect(self.directory / "provider.sqlite3") as db:
            (pem,) = db.execute("SELECT key FROM oidc_provider_rsakey").fetchone()
        keys = httpx.get(f"{self.issuer}/jwks", timeout=30).json()["keys"]
        return str(pem), str(keys[0]["kid"])


@contextmanager
def running_provider(directory: Path, *options: str) -> Iterator[IdP]:
    """Run the provider in a child process for the block."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "provider.log").open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.collector.accounts.oidc_provider",
                str(directory),
                *options,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://"), (directory / "provider.log").read_text()
            yield IdP(url, directory)
        finally:
            process.terminate()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


def start_sign_in(browser: TestClient) -> str:
    """Ask the collector to sign in with SSO; return the provider's authorization URL."""
    response = browser.get("/v1/auth/oidc/login", follow_redirects=False)
    assert response.status_code == 302, response.text
    return response.headers["location"]


def authorize(authorize_url: str, username: str) -> str:
    """Sign ``username`` in on the provider's own login form and let it authorize the
    collector; return the callback path and query the provider sends the browser to."""
    with httpx.Client(timeout=30) as provider_browser:
        response = provider_browser.get(authorize_url)
        # Not signed in at the provider: its login form, then back to the authorization.
        assert response.status_code == 302, response.text
        login_url = urljoin(authorize_url, response.headers["location"])
        form = provider_browser.get(login_url)
        match = _CSRF.search(form.text)
        assert match, form.text
        next_url = parse_qs(urlsplit(login_url).query)["next"][0]
        signed_in = provider_browser.post(
            login_url,
            data={
                "csrfmiddlewaretoken": match.group(1),
                "username": username,
                "password": PROVIDER_PASSWORD,
                "next": next_url,
            },
        )
        assert signed_in.status_code == 302, signed_in.text
        authorized = provider_browser.get(urljoin(login_url, signed_in.headers["location"]))
    # Consent is skipped for the collector's client: straight back to the callback.
    assert authorized.status_code == 302, authorized.text
    callback = urlsplit(authorized.headers["location"])
    assert callback.path == "/v1/auth/oidc/callback", authorized.headers["location"]
    return f"{callback.path}?{callback.query}"


def sign_in_with_sso(browser: TestClient, username: str) -> Any:
    """The whole sign-in of ``username``; the collector's answer to the callback."""
    callback = authorize(start_sign_in(browser), username)
    return browser.get(callback, follow_redirects=False)


def flow_of(browser: TestClient) -> Flow:
    """What the collector's sign-in cookie holds (it is signed, not encrypted)."""
    payload = browser.cookies[FLOW_COOKIE].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return Flow(claims["state"], claims["nonce"], claims["cv"])


def reseal(browser: TestClient, flow: Flow) -> None:
    """Replace the browser's sign-in cookie by one holding ``flow``, signed as the collector
    signs (the test knows the client secret the signing key comes from)."""
    value = FlowSigner(CLIENT_SECRET).seal(flow)
    browser.cookies.delete(FLOW_COOKIE)
    browser.cookies.set(FLOW_COOKIE, value, domain="testserver.local", path="/v1/auth/oidc")


def session_cookie_set(response: Any) -> bool:
    """Whether an answer sets the session cookie."""
    return any(
        header.startswith("promptrail_session=") and not header.startswith('promptrail_session="";')
        for header in response.headers.get_list("set-cookie")
    )
