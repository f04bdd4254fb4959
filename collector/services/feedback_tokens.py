"""Feedback tokens (docs/security.md, "Feedback tokens"): sign and check, no store involved.

The format is the SDK's codec (:mod:`promptrail._feedback_token`), so a token the SDK mints
with the raw key is one this module checks with the key's stored hash. Checking is pure
computation over a map of active key ids to key hashes held by the caller (:class:`KeyIds`): a
token naming an unknown key id costs no store query.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from promptrail._feedback_token import (
    InvalidToken,
    TokenScope,
    decode,
    encode,
    new_score_id,
)

from ..errors import InvalidFeedbackToken

__all__ = ["KeyIds", "TokenScope", "mint", "new_score_id", "verify"]


def mint(scope: TokenScope, key_hash: str) -> str:
    """Return the token for ``scope``, signed for the key with hash ``key_hash``."""
    return encode(scope, key_hash)


def verify(
    token: str, key_hash_of: Callable[[str], str | None], now: float | None = None
) -> tuple[str, TokenScope]:
    """Return ``(key hash, scope)`` of a genuine, unexpired token; else INVALID_FEEDBACK_TOKEN.

    ``key_hash_of`` maps a key id to its hash (None: unknown). Whether the key is still
    active is the caller's check, made after this one.
    """
    try:
        return decode(token, key_hash_of, now)
    except InvalidToken:
        # One answer for every failure: a caller learns nothing about which check refused it.
        raise InvalidFeedbackToken("Invalid or expired feedback token") from None


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
