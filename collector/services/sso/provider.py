"""The identity provider as the collector sees it: its discovery document, its signing keys and
the check of an ID token it issued (docs/security.md, "SSO").

Discovery (``<issuer>/.well-known/openid-configuration``) is read once and kept for
:data:`DISCOVERY_SECONDS`; the document must name the configured issuer exactly. The signing
keys (its ``jwks_uri``) are kept too, and read again when a token names a key id they lack (a
key rotation), at most once per :data:`JWKS_REFRESH_SECONDS`, so forged tokens naming random
key ids cannot make the collector hammer the provider.

An ID token is checked with joserfc (Authlib's JOSE library): its signature against the
provider's keys with an asymmetric algorithm only (``none`` and HMAC are refused: a token
signed with the client secret proves nothing the secret's holders could not forge), then
``iss``, ``aud`` (and ``azp`` when several audiences), ``exp``, ``iat`` and ``nonce``, with
:data:`LEEWAY_SECONDS` of clock skew.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

DISCOVERY_SECONDS = 3600.0
JWKS_REFRESH_SECONDS = 10.0
LEEWAY_SECONDS = 60
HTTP_TIMEOUT_SECONDS = 10.0

# Asymmetric algorithms only: the provider's keys are public, so only it can sign with them.
ID_TOKEN_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)


class ProviderError(Exception):
    """The provider could not be reached, or answered something unusable."""


class TokenRejected(Exception):
    """An ID token whose signature or claims do not hold; the message says which."""


@dataclass(frozen=True)
class Discovery:
    """The parts of a provider's discovery document the sign-in uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None


class Provider:
    """One OpenID Connect provider: discovery, keys and ID token checks, cached."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        http: Callable[[], httpx.Client] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self._http = http or (lambda: httpx.Client(timeout=HTTP_TIMEOUT_SECONDS))
        self._clock = clock
        self._lock = threading.Lock()
        self._discovery: tuple[float, Discovery] | None = None
        self._keys: tuple[float, KeySet] | None = None

    def discovery(self) -> Discovery:
        """The provider's endpoints (read at most once per :data:`DISCOVERY_SECONDS`)."""
        with self._lock:
            if self._discovery is not None:
                read_at, found = self._discovery
                if self._clock() - read_at < DISCOVERY_SECONDS:
                    return found
        document = self._get_json(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        found = _discovery(document, self.issuer)
        with self._lock:
            self._discovery = (self._clock(), found)
        return found

    def check_id_token(
        self, id_token: str, nonce: str, now: Callable[[], int] | None = None
    ) -> dict[str, Any]:
        """Return the claims of a valid ID token issued to this client for ``nonce``.

        Raises :class:`TokenRejected` naming what does not hold.
        """
        keys = self._key_set(refresh=False)
        try:
            token = jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGORITHMS)
        except JoseError as exc:
            if not _unknown_key(exc):
                raise TokenRejected(f"ID token refused: {exc.description or exc.error}") from None
            # A key id the cached set lacks: the provider may have rotated its keys.
            keys = self._key_set(refresh=True)
            try:
                token = jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGORITHMS)
            except (JoseError, ValueError) as again:
                raise TokenRejected(f"ID token refused: {_describe(again)}") from None
        except ValueError as exc:
            raise TokenRejected(f"ID token refused: {exc}") from None
        claims = dict(token.claims)
        registry = JWTClaimsRegistry(
            now=now,
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise TokenRejected(f"ID token refused: {_describe(exc)}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise TokenRejected("ID token refused: several audiences and azp is not this client")
        return claims

    def userinfo(self, access_token: str) -> dict[str, Any]:
        """The provider's userinfo answer for an access token ({} without the endpoint)."""
        endpoint = self.discovery().userinfo_endpoint
        if not endpoint:
            return {}
        return self._get_json(endpoint, {"Authorization": f"Bearer {access_token}"})

    def _key_set(self, refresh: bool) -> KeySet:
        with self._lock:
            cached = self._keys
            if cached is not None and (
                not refresh or self._clock() - cached[0] < JWKS_REFRESH_SECONDS
            ):
                return cached[1]
        document = self._get_json(self.discovery().jwks_uri)
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, KeyError, TypeError) as exc:
            raise ProviderError(f"The provider's signing keys are unusable: {exc}") from None
        with self._lock:
            self._keys = (self._clock(), keys)
        return keys

    def _get_json(self, url: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        try:
            with self._http() as client:
                response = client.get(url, headers=dict(headers or {}))
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ProviderError(f"The identity provider did not answer {url}: {exc}") from None
        if not isinstance(body, dict):
            raise ProviderError(f"The identity provider's {url} is not a JSON object")
        return body


def _discovery(document: Mapping[str, Any], issuer: str) -> Discovery:
    # The document must be the configured issuer's own (OpenID Connect Discovery 1.0, 4.3):
    # a document naming another issuer could send tokens of another provider here.
    if document.get("issuer") != issuer:
        raise ProviderError(
            f"The discovery document names issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    try:
        return Discovery(
            issuer=issuer,
            authorization_endpoint=str(document["authorization_endpoint"]),
            token_endpoint=str(document["token_endpoint"]),
            jwks_uri=str(document["jwks_uri"]),
            userinfo_endpoint=(
                str(document["userinfo_endpoint"]) if document.get("userinfo_endpoint") else None
            ),
        )
    except KeyError as exc:
        raise ProviderError(f"The discovery document lacks {exc.args[0]}") from None


def _unknown_key(exc: JoseError) -> bool:
    return exc.error == "invalid_key_id"


def _describe(exc: Exception) -> str:
    if isinstance(exc, JoseError):
        return exc.description or exc.error
    return str(exc)
