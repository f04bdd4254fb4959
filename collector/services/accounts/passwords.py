"""Password hashing: Argon2id through argon2-cffi (docs/security.md, "Accounts").

argon2-cffi's defaults are RFC 9106's second recommended set (Argon2id, 64 MiB, 3 passes,
4 lanes): about 50-100 ms a hash on a small server, which is the point. A password that is
checked against no user (an unknown e-mail address, a user without a password) is checked
against a hash of a random password instead, so both answers cost the same work.
"""

from __future__ import annotations

import secrets
import threading

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ...errors import ValidationFailed

MIN_PASSWORD_LENGTH = 12
# Hashing is costly on purpose; a longer input only makes each attempt cost more.
MAX_PASSWORD_LENGTH = 1024


def check_password(password: str, field: str = "password") -> str:
    """Return ``password`` if it is long enough to set, else raise a 400 naming ``field``."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValidationFailed(field, f"{field} must be at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ValidationFailed(field, f"{field} must be at most {MAX_PASSWORD_LENGTH} characters")
    return password


class Passwords:
    """Hash new passwords and check given ones against stored hashes."""

    def __init__(self) -> None:
        self._hasher = PasswordHasher()
        self._dummy: str | None = None
        self._lock = threading.Lock()

    def hash(self, password: str) -> str:
        """Return the Argon2id hash of a password (checked for length first)."""
        return self._hasher.hash(check_password(password))

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """Return whether ``password`` matches ``stored_hash``.

        With no hash (no such user, or a user without a password) the password is checked
        against a dummy hash and the answer is False: the same work either way.
        """
        try:
            matched = self._hasher.verify(stored_hash or self._dummy_hash(), password)
        except (VerificationError, InvalidHashError):
            return False
        return matched and bool(stored_hash)

    def _dummy_hash(self) -> str:
        with self._lock:
            if self._dummy is None:
                self._dummy = self._hasher.hash(secrets.token_urlsafe(24))
            return self._dummy
