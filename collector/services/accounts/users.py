"""User accounts: create, find, list, change and disable (docs/security.md, "Accounts").

E-mail addresses are unique whatever their case; a user is found by its address in any case
and keeps the case it was created with. A user without a password (made for SSO, or before
one is set) cannot sign in with one.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from ...errors import UserAlreadyExists, UserNotFound, ValidationFailed
from ...store.accounts import AccountStore, UserRow
from ...store.writes import WriteOutcome
from ..refused_writes import raise_if_refused
from .passwords import Passwords

# Deliberately loose (one @, a dot in the domain, no spaces): the address is a name here, and
# only the identity provider or a person ever checks that mail reaches it.
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
MAX_EMAIL_LENGTH = 254
MAX_NAME_LENGTH = 200
USER_ID_PREFIX = "usr_"


def check_email(email: str, field: str = "email") -> str:
    """Return the address without surrounding spaces, or raise a 400 naming ``field``."""
    email = email.strip()
    if len(email) > MAX_EMAIL_LENGTH or not _EMAIL.fullmatch(email):
        raise ValidationFailed(field, f"{field} must be an e-mail address such as ada@example.com")
    return email


def check_name(name: str | None) -> str:
    """Return a display name ('' for none), or raise a 400 naming ``name``."""
    name = (name or "").strip()
    if len(name) > MAX_NAME_LENGTH:
        raise ValidationFailed("name", f"name must be at most {MAX_NAME_LENGTH} characters")
    return name


class UserService:
    """Create and change user accounts."""

    def __init__(
        self,
        store: AccountStore,
        passwords: Passwords,
        end_sessions: Callable[[str], None],
        retry_after_seconds: int = 2,
    ) -> None:
        """``end_sessions(user_id)`` ends a user's sessions (once it is disabled)."""
        self._store = store
        self._passwords = passwords
        self._end_sessions = end_sessions
        self._retry_after = retry_after_seconds
        # Two creates of one address in this process: the second sees the first.
        self._create_lock = threading.Lock()

    def create(
        self,
        email: str,
        password: str | None = None,
        name: str | None = None,
        instance_admin: bool = False,
    ) -> UserRow:
        """Create a user (409 USER_ALREADY_EXISTS for an address in use, in any case)."""
        email = check_email(email)
        row = UserRow(
            id=USER_ID_PREFIX + secrets.token_hex(12),
            email=email,
            name=check_name(name),
            password_hash=self._passwords.hash(password) if password is not None else "",
            disabled=False,
            instance_admin=instance_admin,
            created_at=datetime.now(UTC),
        )
        with self._create_lock:
            if self._store.user_by_email(email) is not None:
                raise UserAlreadyExists(email)
            self._stored(self._store.put_user(row))
        return row

    def get(self, email: str) -> UserRow:
        """Return the user with this address (any case), or raise 404 USER_NOT_FOUND."""
        row = self._store.user_by_email(email.strip())
        if row is None:
            raise UserNotFound(email)
        return row

    def find(self, email: str) -> UserRow | None:
        """Return the user with this address (any case), or None."""
        return self._store.user_by_email(email.strip())

    def by_id(self, user_id: str) -> UserRow | None:
        """Return the user with this id, or None."""
        return self._store.user_by_id(user_id)

    def by_ids(self, ids: list[str]) -> dict[str, UserRow]:
        """Return the users with these ids, by id."""
        return self._store.users_by_id(ids)

    def list(self) -> list[UserRow]:
        """Return every user, oldest first."""
        return self._store.users()

    def has_users(self) -> bool:
        """Return whether any user exists."""
        return self._store.has_users()

    def update(
        self,
        email: str,
        *,
        name: str | None = None,
        password: str | None = None,
        disabled: bool | None = None,
    ) -> UserRow:
        """Change a user's name, password or disabled state; a disabled user's sessions end."""
        row = self.get(email)
        changed = replace(
            row,
            name=check_name(name) if name is not None else row.name,
            password_hash=self._passwords.hash(password) if password else row.password_hash,
            disabled=row.disabled if disabled is None else disabled,
        )
        self._stored(self._store.put_user(changed))
        # A disabled user, or one with a new password, keeps no session signed in before.
        if changed.disabled or password:
            self._end_sessions(row.id)
        return changed

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "accounts")
