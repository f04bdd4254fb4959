"""Sign-in sessions: made at sign-in, resolved on every cookie request, ended at sign-out.

A session's token (256 random bits) lives only in the browser's cookie; the store keeps its
SHA-256 with the user, the CSRF token the session's writes must repeat, and when it expires.
Resolving a token reads the session, its user and the user's memberships (three small point
reads); what it found is kept in memory for at most :data:`CACHE_SECONDS`, so a request with a
known cookie costs a hash and a dict lookup.

What ends a session takes effect here at once: sign-out, disabling the user, a new password
and a change of the user's roles drop the user's entries from this collector's cache before
they return. Another collector on the same ClickHouse server keeps what it cached for at most
:data:`CACHE_SECONDS` more (docs/security.md, "Accounts"): the cross-collector bound.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ...access.principal import ROLES, Role, SignedIn
from ...errors import InvalidCredentials
from ...store.accounts import AccountStore, SessionRow, UserRow
from ...store.writes import WriteOutcome
from ..refused_writes import raise_if_refused
from .login_limits import LoginLimits
from .passwords import Passwords

SESSION_SECONDS = 7 * 24 * 3600
CACHE_SECONDS = 5.0
# Resolved sessions kept at most; past it the cache starts afresh (each entry is re-read).
MAX_CACHED = 10_000

_WRONG = "Wrong e-mail or password"


def hash_token(token: str) -> str:
    """Return the stored form of a session token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class NewSession:
    """A sign-in's session: the token for the cookie (never stored) and who signed in."""

    token: str
    signed_in: SignedIn
    user: UserRow
    max_age: int


@dataclass(frozen=True)
class _Cached:
    signed_in: SignedIn
    read_at: float
    expires_at: float  # time.time() the session ends


class _SessionCache:
    """Resolved sessions of this collector, by token hash, dropped by user at once."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[str, _Cached] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, digest: str) -> tuple[int, SignedIn | None]:
        with self._lock:
            entry = self._entries.get(digest)
            now = self._clock()
            if entry is not None and (
                now - entry.read_at > CACHE_SECONDS or time.time() >= entry.expires_at
            ):
                del self._entries[digest]
                entry = None
            return self._generation, entry.signed_in if entry else None

    def keep(self, digest: str, generation: int, signed_in: SignedIn, expires_at: float) -> None:
        # A read that raced an invalidation (the generation moved) is not kept.
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= MAX_CACHED:
                self._entries.clear()
            self._entries[digest] = _Cached(signed_in, self._clock(), expires_at)

    def drop(self, *, digest: str = "", user_id: str = "") -> None:
        with self._lock:
            self._generation += 1
            self._entries.pop(digest, None)
            if user_id:
                for key in [k for k, v in self._entries.items() if v.signed_in.user_id == user_id]:
                    del self._entries[key]


class SessionService:
    """Sign in, resolve a session token (the access layer's ``SessionResolver``), sign out."""

    def __init__(
        self,
        store: AccountStore,
        passwords: Passwords,
        limits: LoginLimits,
        retry_after_seconds: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._passwords = passwords
        self.limits = limits
        self._retry_after = retry_after_seconds
        self._cache = _SessionCache(clock)

    def sign_in(self, email: str, password: str) -> NewSession:
        """Check an e-mail and password and start a session.

        A wrong password, an unknown address, a user without a password and a disabled user
        all answer the same 401 INVALID_CREDENTIALS after the same hashing work; an address
        with too many recent failures answers 429 RATE_LIMITED before any check.
        """
        self.limits.admit(email.strip())
        user = self._store.user_by_email(email.strip()) if email.strip() else None
        matched = self._passwords.verify(user.password_hash if user else None, password)
        if user is None or not matched or user.disabled:
            self.limits.failed(email.strip())
            raise InvalidCredentials(_WRONG)
        self.limits.succeeded(email.strip())
        now = datetime.now(UTC)
        self._stored(self._store.record_login(user.id, now))
        user = replace(user, last_login_at=now)
        token = secrets.token_urlsafe(32)
        row = SessionRow(
            token_hash=hash_token(token),
            user_id=user.id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + timedelta(seconds=SESSION_SECONDS),
            revoked=False,
        )
        self._stored(self._store.put_session(row))
        return NewSession(token, self._signed_in(user, row), user, SESSION_SECONDS)

    def resolve(self, token: str) -> SignedIn | None:
        """Return the user of a live session, or None (unknown, ended, expired, disabled)."""
        if not token:
            return None
        digest = hash_token(token)
        generation, signed_in = self._cache.get(digest)
        if signed_in is not None:
            return signed_in
        row = self._store.session(digest)
        if row is None or row.revoked or row.expires_at <= datetime.now(UTC):
            return None
        user = self._store.user_by_id(row.user_id)
        if user is None or user.disabled:
            return None
        signed_in = self._signed_in(user, row)
        self._cache.keep(digest, generation, signed_in, row.expires_at.timestamp())
        return signed_in

    def sign_out(self, token: str) -> None:
        """End the session of ``token`` (an unknown or ended one: nothing to do)."""
        if not token:
            return
        digest = hash_token(token)
        self._stored(self._store.revoke_sessions(token_hash=digest))
        self._cache.drop(digest=digest)

    def end_user_sessions(self, user_id: str) -> None:
        """End every session of a user (disabled, or given a new password)."""
        self._stored(self._store.revoke_sessions(user_id=user_id))
        self._cache.drop(user_id=user_id)

    def roles_changed(self, user_id: str) -> None:
        """Re-read a user's roles at its next request (a membership changed)."""
        self._cache.drop(user_id=user_id)

    def _signed_in(self, user: UserRow, row: SessionRow) -> SignedIn:
        roles: dict[str, Role] = {}
        for membership in self._store.memberships_of_user(user.id):
            role = _role(membership.role)
            if role is not None:
                roles[membership.project] = role
        return SignedIn(
            user_id=user.id,
            email=user.email,
            roles=roles,
            csrf_token=row.csrf_token,
            instance_admin=user.instance_admin,
        )

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "sessions")


def _role(value: str) -> Role | None:
    for role in ROLES:
        if role == value:
            return role
    return None
