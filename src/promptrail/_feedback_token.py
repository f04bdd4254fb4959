"""The signed feedback token: one codec for the SDK, which signs with the raw API key, and the
collector, which signs and checks with the key's stored SHA-256 (docs/security.md).

A token lets an end user's browser post one score on one record or trace without an API key
(``POST /v1/feedback/{token}``)::

    secret  = HMAC-SHA256(bytes.fromhex(sha256(key)), b"promptrail feedback token v1")
    payload = {"v":1,"k":"key_"+sha256(key)[:12],"r":..,"t":..,"n":..,"d":..,"c":..,"e":..,"i":..}
    token   = "pft_" + b64url(payload) + "." + b64url(HMAC-SHA256(secret, "pft_" + b64url(payload)))

(base64url without padding; the payload is compact JSON in that key order: the record or the
trace, the score's name, type and categories, the expiry in Unix seconds and the score's id.)

Pure standard library and no other promptrail import: the collector imports this module
without loading the SDK's capture machinery.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PREFIX = "pft_"
CONTEXT = b"promptrail feedback token v1"
PAYLOAD_KEYS = ("v", "k", "r", "t", "n", "d", "c", "e", "i")
MAX_TOKEN_CHARS = 8192
DEFAULT_TTL_SECONDS = 86_400
MAX_TTL_SECONDS = 2_592_000


class InvalidToken(ValueError):
    """A token that is not genuine, not whole, or expired (deliberately without saying which)."""


@dataclass(frozen=True)
class TokenScope:
    """What a token allows: one vote of one name on one record or trace until ``expires``."""

    key_id: str
    request_id: str | None
    trace_id: str | None
    name: str
    data_type: str | None
    categories: list[str] | None
    expires: int  # unix seconds
    score_id: str


def b64url(data: bytes) -> str:
    """base64url without the ``=`` padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """Decode base64url given without its padding (binascii.Error if it is none)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def key_hash(api_key: str) -> str:
    """The SHA-256 of a key, in hex: what the collector stores instead of the key."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def key_id(digest: str) -> str:
    """The short, non-secret id a token names its key by, from the key's hash."""
    return "key_" + digest[:12]


def signing_secret(digest: str) -> bytes:
    """The MAC key of a key's tokens, derived from its hash (so the collector can derive it)."""
    return hmac.new(bytes.fromhex(digest), CONTEXT, hashlib.sha256).digest()


def new_score_id() -> str:
    """A fresh ``score_<32 hex>`` id: the id the vote a token carries is stored under."""
    return "score_" + secrets.token_hex(16)


def encode(scope: TokenScope, digest: str) -> str:
    """Return the token for ``scope``, signed for the key whose hash is ``digest``."""
    payload = {
        "v": 1,
        "k": scope.key_id,
        "r": scope.request_id,
        "t": scope.trace_id,
        "n": scope.name,
        "d": scope.data_type,
        "c": scope.categories,
        "e": scope.expires,
        "i": scope.score_id,
    }
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    signed = PREFIX + b64url(text.encode())
    return f"{signed}.{b64url(_mac(digest, signed))}"


def decode(
    token: str, key_hash_of: Callable[[str], str | None], now: float | None = None
) -> tuple[str, TokenScope]:
    """Return ``(key hash, scope)`` of a genuine, unexpired token; else raise InvalidToken.

    ``key_hash_of`` maps a key id to its hash (None: unknown). The MAC is compared in
    constant time before any field but ``k`` is read. Whether the key is still active is
    the caller's check, made after this one.
    """
    signed, dot, mac_text = token.rpartition(".")
    if not dot or not signed.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
        raise InvalidToken
    try:
        raw = unb64url(signed[len(PREFIX) :])
        mac = unb64url(mac_text)
        payload = json.loads(raw)
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError are ones
        raise InvalidToken from None
    if not isinstance(payload, dict):
        raise InvalidToken
    named = payload.get("k")
    if not isinstance(named, str):
        raise InvalidToken
    digest = key_hash_of(named)
    if digest is None or not hmac.compare_digest(mac, _mac(digest, signed)):
        raise InvalidToken
    # Genuine from here on: the fields are the minter's.
    if list(payload) != list(PAYLOAD_KEYS) or payload["v"] != 1:
        raise InvalidToken
    expires = _field(payload, "e", int)
    if (time.time() if now is None else now) >= expires:
        raise InvalidToken
    request_id = _field(payload, "r", (str, type(None)))
    trace_id = _field(payload, "t", (str, type(None)))
    if (request_id is None) == (trace_id is None):
        raise InvalidToken
    scope = TokenScope(
        key_id=named,
        request_id=request_id,
        trace_id=trace_id,
        name=_field(payload, "n", str),
        data_type=_field(payload, "d", (str, type(None))),
        categories=_field(payload, "c", (list, type(None))),
        expires=expires,
        score_id=_field(payload, "i", str),
    )
    return digest, scope


def _mac(digest: str, signed: str) -> bytes:
    return hmac.new(signing_secret(digest), signed.encode(), hashlib.sha256).digest()


def _field(payload: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = payload.get(name)
    if not isinstance(value, kind):
        raise InvalidToken
    return value
