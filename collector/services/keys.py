"""API keys: issue (shown once, stored hashed) and authenticate, with an exact cache."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
from datetime import UTC, datetime

from ..errors import InvalidApiKey, ValidationFailed
from ..store.keys import KeyStore

_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
KEY_PREFIX = "pr-"


def hash_key(raw: str) -> str:
    """Return the stored form of a key."""
    return hashlib.sha256(raw.encode()).hexdigest()


class KeyService:
    """Create and check API keys."""

    def __init__(self, store: KeyStore) -> None:
        self._store = store
        # Keys are never changed once written, so a positive lookup stays true for the life
        # of the process; unknown keys are not cached (another process may create them).
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    def create(self, project: str) -> str:
        """Create a key for ``project`` and return it; only its hash is kept."""
        if not _PROJECT.fullmatch(project):
            raise ValidationFailed(
                "project", "project must be 1-64 letters, digits, '_', '.', or '-'"
            )
        raw = KEY_PREFIX + secrets.token_urlsafe(32)
        self._store.insert(hash_key(raw), project, raw[:8], datetime.now(UTC))
        return raw

    def ensure(self, raw: str, project: str = "default") -> bool:
        """Make sure ``raw`` is a key of ``project``; return whether it was created."""
        if self._store.project_of(hash_key(raw)) is not None:
            return False
        self._store.insert(hash_key(raw), project, raw[:8], datetime.now(UTC))
        return True

    def has_keys(self, project: str) -> bool:
        """Return whether a project has any key."""
        return self._store.count_for(project) > 0

    def known_project(self, raw: str | None) -> str | None:
        """Return the project of a key already checked by this process, without the store."""
        if not raw:
            return None
        with self._lock:
            return self._known.get(hash_key(raw))

    def authenticate(self, raw: str | None) -> str:
        """Return the project of a key, or raise INVALID_API_KEY."""
        if not raw:
            raise InvalidApiKey(
                "Missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
            )
        digest = hash_key(raw)
        with self._lock:
            project = self._known.get(digest)
        if project is None:
            project = self._store.project_of(digest)
            if project is None:
                raise InvalidApiKey("Invalid API key")
            with self._lock:
                self._known[digest] = project
        return project
