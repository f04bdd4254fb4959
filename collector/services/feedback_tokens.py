"""Feedback tokens (CONTRACT 9, /work/briefs/token.md): sign and check, no store involved.

A token carries its scope (record or trace, name, type, categories, expiry, score id) signed
with a secret derived from the minting key's stored hash, so the collector can check it with
what it stores and the SDK can mint it with the raw key and no round trip. Checking is pure
computation over a map of active key ids to key hashes held by the caller
(:class:`KeyIds`): a token naming an unknown key id costs no store query.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidFeedbackToken

TOKEN_PREFIX = "pft_"
_CONTEXT = b"promptrail feedback token v1"
_PAYLOAD_KEYS = ("v", "k", "r", "t", "n", "d", "c", "e", "i")


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


def token_secret(key_hash: str) -> bytes:
    """The MAC key of a key's tokens: HMAC-SHA256(bytes of its SHA-256, a fixed context)."""
    return hmac.new(bytes.fromhex(key_hash), _CONTEXT, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_score_id() -> str:
    """A fresh service-made score id."""
    return "score_" + secrets.token_hex(16)


def mint(scope: TokenScope, key_hash: str) -> str:
    """Return the token for ``scope``, signed for the key with hash ``key_hash``."""
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
    body = _b64(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    signed = TOKEN_PREFIX + body
    mac = hmac.new(token_secret(key_hash), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{_b64(mac)}"


def _invalid() -> InvalidFeedbackToken:
    # One answer for every failure: a caller learns nothing about which check refused it.
    return InvalidFeedbackToken("Invalid or expired feedback token")


def _field(payload: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = payload.get(name)
    if not isinstance(value, kind):
        raise _invalid()
    return value


def verify(
    token: str, key_hash_of: Callable[[str], str | None], now: float | None = None
) -> tuple[str, TokenScope]:
    """Return ``(key hash, scope)`` of a genuine, unexpired token; else INVALID_FEEDBACK_TOKEN.

    ``key_hash_of`` maps a key id to its hash (None: unknown). The MAC is compared in
    constant time before any field but ``k`` is read. Whether the key is still active is
    the caller's check, made after this one.
    """
    signed, dot, mac_text = token.rpartition(".")
    if not dot or not signed.startswith(TOKEN_PREFIX) or len(token) > 8192:
        raise _invalid()
    try:
        raw = _unb64(signed[len(TOKEN_PREFIX) :])
        mac = _unb64(mac_text)
        payload = json.loads(raw)
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError are ones
        raise _invalid() from None
    if not isinstance(payload, dict):
        raise _invalid()
    key_id = payload.get("k")
    if not isinstance(key_id, str):
        raise _invalid()
    key_hash = key_hash_of(key_id)
    if key_hash is None:
        raise _invalid()
    expected = hmac.new(token_secret(key_hash), signed.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected):
        raise _invalid()
    # Genuine from here on: the fields are the minter's.
    if list(payload) != list(_PAYLOAD_KEYS) or payload["v"] != 1:
        raise _invalid()
    expires = _field(payload, "e", int)
    if (time.time() if now is None else now) >= expires:
        raise _invalid()
    request_id = _field(payload, "r", (str, type(None)))
    trace_id = _field(payload, "t", (str, type(None)))
    if (request_id is None) == (trace_id is None):
        raise _invalid()
    categories = _field(payload, "c", (list, type(None)))
    scope = TokenScope(
        key_id=key_id,
        request_id=request_id,
        trace_id=trace_id,
        name=_field(payload, "n", str),
        data_type=_field(payload, "d", (str, type(None))),
        categories=categories,
        expires=expires,
        score_id=_field(payload, "i", str),
    )
    return key_hash, scope


class KeyIds:
    """Key id -> key hash of every key of the store, held in memory.

    A token names its key by id; its MAC is checked with the secret derived from that key's
    hash. An id absent from the map reloads it at most once per ``reload_seconds`` (a key
    made since the last load, perhaps by another collector on a server), so a flood of made-up
    tokens costs at most one store query per interval in all, not one per token. Whether the
    key is still active is asked only once a token's MAC is genuine (docs/security.md).
    """

    def __init__(self, load: Callable[[], dict[str, str]], reload_seconds: float = 1.0) -> None:
        self._load = load
        self._reload = reload_seconds
        self._hashes: dict[str, str] = {}
        self._loaded_at: float | None = None
        self._lock = threading.Lock()

    def learn(self, key_id: str, key_hash: str) -> None:
        """Remember a key seen minting a token (it may be newer than the last load)."""
        with self._lock:
            self._hashes = {**self._hashes, key_id: key_hash}

    def hash_of(self, key_id: str) -> str | None:
        """Return the hash of the key with this id, or None."""
        found = self._hashes.get(key_id)
        if found is not None:
            return found
        with self._lock:
            now = time.monotonic()
            if self._loaded_at is None or now - self._loaded_at >= self._reload:
                self._loaded_at = now
                self._hashes = self._load()
        return self._hashes.get(key_id)
