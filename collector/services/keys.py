"""API keys: issue (shown once, stored hashed), authenticate, list, revoke and rotate.

How a revocation reaches the next request (docs/deploy.md, "API keys"):

- Embedded store: only this process can open it, so every collector (every ``KeyService``)
  on it lives here and shares one :class:`KeyCache`. A revocation is stored, then dropped from
  that cache before it returns: the next request finds no entry and reads the store. A request
  answered from the cache costs a hash and a dict lookup instead of a store query (measured in
  docs/benchmarks.md, "API key checks").
- ClickHouse server: other processes may revoke a key at any time, so nothing is cached and
  every request reads the key's row and its revocations in one point query.

When a key was last used is kept in memory and written at most once a minute per key (and
when the collector stops), never once per request.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Literal
from weakref import WeakValueDictionary

from ..access.permissions import SCOPE_GRANTS
from ..access.principal import ALL_SCOPES, SCOPES, Scope
from ..errors import InvalidApiKey, KeyNotFound, ValidationFailed
from ..models.keys import MAX_GRACE_SECONDS, KeyCreate, KeyCreated
from ..store.keys import KeyGrants, KeyRow, KeyState, KeyStore, NewKey
from ..store.writes import Refused, WriteOutcome

logger = logging.getLogger("promptrail.keys")

_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
KEY_PREFIX = "pr-"
# A key's id: ``key_`` and the first 12 hex digits of its SHA-256. It names the key in lists and
# revocations without revealing anything of it (the hash is one-way); 48 bits keep ids of one
# store distinct.
KEY_ID_PREFIX = "key_"
_ID_HEX = 12
_KEY_ID = re.compile(rf"{KEY_ID_PREFIX}([0-9a-f]{{{_ID_HEX}}})")
# Each key's last use is written at most this often by each collector.
USAGE_WRITE_SECONDS = 60.0

# How many keys' scopes and expiry a collector keeps in memory at most.
_MAX_KEPT_GRANTS = 100_000

KeyStatus = Literal["active", "expiring", "revoked", "expired"]


def hash_key(raw: str) -> str:
    """Return the stored form of a key."""
    return hashlib.sha256(raw.encode()).hexdigest()


def key_id(key_hash: str) -> str:
    """Return the short, non-secret id of the key with this hash."""
    return KEY_ID_PREFIX + key_hash[:_ID_HEX]


@dataclass(frozen=True)
class KeyInfo:
    """One key as a list shows it: never the key nor its hash."""

    key_id: str
    project: str
    prefix: str
    name: str
    scopes: list[Scope]  # in the docs' order
    created_at: datetime
    created_by: str
    last_used_at: datetime | None
    expires_at: datetime | None
    status: KeyStatus
    # When the key stops (expiring) or stopped (revoked) working; None while active.
    revoked_at: datetime | None


@dataclass(frozen=True)
class IssuedKey:
    """A new key (shown once) and how a list shows it."""

    api_key: str
    info: KeyInfo


@dataclass(frozen=True)
class RotatedKeys:
    """A rotation's new key (shown once) and the keys it revokes."""

    project: str
    api_key: str
    key_id: str
    revoked: list[KeyInfo]


@dataclass(frozen=True)
class KeyGrant:
    """What an accepted key may do: its project and scopes, and its id (never the key)."""

    project: str
    scopes: frozenset[Scope]
    key_id: str


@dataclass(frozen=True)
class _Checked:
    grant: KeyGrant
    # time.time() from which the key is refused (0: at once), or None.
    refused_from: float | None
    # time.time() from which the key has expired, or None.
    expires_at: float | None

    @property
    def project(self) -> str:
        return self.grant.project

    def refused(self, now: float) -> bool:
        return self.refused_from is not None and now >= self.refused_from

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def _refused_from(state: KeyState) -> float | None:
    if state.revoked_now:
        return 0.0
    return state.refused_from.timestamp() if state.refused_from else None


def _refused_now(state: KeyState) -> bool:
    refused_from = _refused_from(state)
    return refused_from is not None and time.time() >= refused_from


class KeyCache:
    """Keys already checked, shared by every :class:`KeyService` of one embedded store.

    Exact because every writer of that store lives in this process and drops a key here after
    storing its revocation. A check keeps what it read only if no revocation happened while it
    was reading (the generation did not move), so a read that raced a revocation is not kept.
    """

    _shared: ClassVar[WeakValueDictionary[tuple[str, str], KeyCache]] = WeakValueDictionary()
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._entries: dict[str, _Checked] = {}
        self._generation = 0
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, store_url: str, database: str) -> KeyCache:
        """Return the one cache of the keys of ``database`` on the embedded store ``store_url``."""
        with cls._shared_lock:
            cache = cls._shared.get((store_url, database))
            if cache is None:
                cache = cls._shared[(store_url, database)] = KeyCache()
            return cache

    def lookup(self, digest: str) -> tuple[int, _Checked | None]:
        """Return the generation and the entry of a key hash, if any."""
        with self._lock:
            return self._generation, self._entries.get(digest)

    def keep(self, digest: str, generation: int, entry: _Checked) -> None:
        """Remember a key read at ``generation`` unless a revocation happened since."""
        with self._lock:
            if self._generation == generation:
                self._entries[digest] = entry

    def reset(self) -> None:
        """Forget every key: the store's keys were replaced by something other than this
        process's writers (a database emptied or restored under it)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def forget(self, digests: Iterable[str]) -> None:
        """Drop keys just revoked (after the revocation is stored)."""
        with self._lock:
            self._generation += 1
            for digest in digests:
                self._entries.pop(digest, None)


class KeyService:
    """Create, check, list, revoke and rotate API keys."""

    def __init__(
        self, store: KeyStore, cache: KeyCache | None = None, retry_after_seconds: int = 2
    ) -> None:
        """A write the store refuses answers 503 ``STORE_UNAVAILABLE`` asking the client to
        come back in ``retry_after_seconds`` (Settings.store_retry_after_seconds)."""
        self._store = store
        self._retry_after = retry_after_seconds
        self._cache = cache
        self._used: dict[str, float] = {}  # key hash -> last use not yet written
        self._used_lock = threading.Lock()
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None
        self._grants: dict[str, KeyGrants] = {}  # key hash -> scopes and expiry
        self._grants_lock = threading.Lock()

    # -- issuing ---------------------------------------------------------------------------

    def create(
        self, project: str, scopes: Iterable[Scope] = ALL_SCOPES, created_by: str = ""
    ) -> str:
        """Create a key for ``project`` and return it; only its hash is kept."""
        return self.issue(project, scopes, created_by=created_by).api_key

    def issue(
        self,
        project: str,
        scopes: Iterable[Scope] = ALL_SCOPES,
        expires_in: int | None = None,
        created_by: str = "",
        name: str | None = None,
    ) -> IssuedKey:
        """Create a key for ``project`` with ``scopes``, working for ``expires_in`` seconds
        (None: until revoked); return it (shown once) with how a list shows it."""
        _check_project(project)
        wanted = frozenset(scopes)
        if not wanted:
            raise ValidationFailed("scopes", "a key needs at least one scope")
        raw = KEY_PREFIX + secrets.token_urlsafe(32)  # 256 random bits
        now = datetime.now(UTC)
        key = NewKey(
            key_hash=hash_key(raw),
            project=project,
            key_prefix=raw[:8],
            created_at=now,
            scopes=wanted,
            expires_at=now + timedelta(seconds=expires_in) if expires_in else None,
            created_by=created_by,
            name=name or "",
        )
        self._stored(self._store.insert(key))
        row = KeyRow(
            project=project,
            refused_from=None,
            revoked_now=False,
            scopes=wanted,
            expires_at=key.expires_at,
            key_hash=key.key_hash,
            key_prefix=key.key_prefix,
            created_at=now,
            last_used_at=None,
            created_by=created_by,
            name=key.name,
        )
        return IssuedKey(raw, self._info(row))

    def ensure(self, raw: str, project: str = "default") -> bool:
        """Make sure ``raw`` is a key of ``project``; return whether it was created.

        A key revoked before stays revoked: it is not made again, and the log says so.
        """
        state = self._store.state(hash_key(raw))
        if state is not None:
            if _refused_now(state):
                logger.warning("the initial API key is revoked: requests with it get 401")
            return False
        key = NewKey(
            hash_key(raw), project, raw[:8], datetime.now(UTC), ALL_SCOPES, None, "start-up"
        )
        self._stored(self._store.insert(key))
        return True

    def has_keys(self, project: str) -> bool:
        """Return whether a project has any key (revoked ones too)."""
        return self._store.count_for(project) > 0

    # -- checking each request -------------------------------------------------------------

    def known_project(self, raw: str | None) -> str | None:
        """Return the project of a key this process checked and still accepts, without the store.

        None when the store must be asked (:meth:`authenticate`): an unknown key, a refused one,
        or any key on a ClickHouse server.
        """
        grant = self.known_grant(raw)
        return None if grant is None else grant.project

    def known_grant(self, raw: str | None) -> KeyGrant | None:
        """:meth:`known_project`, with the key's scopes and id."""
        if not raw or self._cache is None:
            return None
        digest = hash_key(raw)
        _, entry = self._cache.lookup(digest)
        now = time.time()
        if entry is None or entry.refused(now) or entry.expired(now):
            return None
        self._note_use(digest, now)
        return entry.grant

    def authenticate(self, raw: str | None) -> str:
        """Return the project of a key, or raise INVALID_API_KEY (missing, unknown, revoked)."""
        return self.authenticate_grant(raw).project

    def authenticate_grant(self, raw: str | None) -> KeyGrant:
        """:meth:`authenticate`, with the key's scopes and id."""
        if not raw:
            raise InvalidApiKey(
                "Missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
            )
        digest = hash_key(raw)
        entry = self._checked(digest)
        if entry is None:
            raise InvalidApiKey("Invalid API key")
        now = time.time()
        if entry.refused(now):
            raise InvalidApiKey("This API key was revoked")
        if entry.expired(now):
            raise InvalidApiKey("This API key has expired")
        self._note_use(digest, now)
        return entry.grant

    def _checked(self, digest: str) -> _Checked | None:
        """The key with this hash as checked (cached on the embedded store); None if unknown."""
        generation, entry = self._cache.lookup(digest) if self._cache else (0, None)
        if entry is None:
            state = self._store.state(digest)
            if state is None:
                return None
            grants = self._grants_of(digest)
            if grants is None:  # made and gone between the two reads: a restore; unknown
                return None
            entry = _Checked(
                KeyGrant(state.project, grants.scopes, key_id(digest)),
                _refused_from(state),
                grants.expires_at.timestamp() if grants.expires_at else None,
            )
            if self._cache is not None:
                self._cache.keep(digest, generation, entry)
        return entry

    def _grants_of(self, digest: str) -> KeyGrants | None:
        """A key's scopes and expiry: never changed once made, so kept for the process's life
        (exact on a ClickHouse server too, where every check still reads the revocations)."""
        with self._grants_lock:
            known = self._grants.get(digest)
        if known is None:
            known = self._store.grants(digest)
            if known is not None:
                with self._grants_lock:
                    if len(self._grants) >= _MAX_KEPT_GRANTS:
                        self._grants.clear()  # a bound, not an eviction policy: keys are few
                    self._grants[digest] = known
        return known

    # -- feedback tokens (services/feedback_tokens.py) -------------------------------------

    def active_project(self, digest: str) -> str | None:
        """Return the project of the key with this hash while it is accepted and may write
        scores (a feedback token writes one for its key), else None."""
        entry = self._checked(digest)
        now = time.time()
        if entry is None or entry.refused(now) or entry.expired(now):
            return None
        if entry.grant.scopes.isdisjoint(SCOPE_GRANTS["ingest"]):
            return None
        return entry.project

    def hashes_by_id(self) -> dict[str, str]:
        """Return key id -> key hash of every key of the store (revoked ones too)."""
        return {key_id(row.key_hash): row.key_hash for row in self._store.rows()}

    # -- listing, revoking, rotating -------------------------------------------------------

    def list_keys(self, project: str | None = None, include_revoked: bool = False) -> list[KeyInfo]:
        """Return the keys of a project (or of all), oldest first; revoked ones on request."""
        keys = [self._info(row) for row in self._store.rows(project=project)]
        return [k for k in keys if include_revoked or k.status != "revoked"]

    def revoke(self, ref: str) -> KeyInfo:
        """Refuse a key, given by id or as the key itself, from the next request on.

        Revoking a revoked key changes nothing and is no error.
        """
        row = self._find(ref)
        if self._info(row).status != "revoked":
            self._stored(self._store.revoke([(row.key_hash, row.project)], datetime.now(UTC), 0))
            self._forget([row.key_hash])
        return self._info(self._find_hash(row.key_hash) or row)

    def rotate(self, project: str, grace_seconds: int = 0) -> RotatedKeys:
        """Make a new key for ``project`` and refuse its other keys after ``grace_seconds``.

        The new key is stored before the old ones are revoked, so the project is never left
        without a working key. A project without a working key has nothing to rotate.
        """
        _check_project(project)
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise ValidationFailed(
                "grace_seconds", f"grace_seconds must be 0 to {MAX_GRACE_SECONDS}"
            )
        old = [row for row in self._store.rows(project=project) if not _refused_now(row)]
        if not old:
            raise KeyNotFound(
                f"Project '{project}' has no working API key to rotate; create one with "
                "'promptrail keys create'",
                {"project": project},
            )
        # The new key may do what the old ones did together, no more.
        raw = self.create(project, frozenset().union(*(row.scopes for row in old)))
        self._stored(
            self._store.revoke(
                [(row.key_hash, row.project) for row in old], datetime.now(UTC), grace_seconds
            )
        )
        self._forget([row.key_hash for row in old])
        revoked = [self._info(self._find_hash(row.key_hash) or row) for row in old]
        return RotatedKeys(project, raw, key_id(hash_key(raw)), revoked)

    def _find(self, ref: str) -> KeyRow:
        ref = ref.strip()
        by_id = _KEY_ID.fullmatch(ref)
        row = self._find_hash(by_id.group(1)) if by_id else None
        row = row or self._find_hash(hash_key(ref))
        if row is None:
            # Never repeat what was given: it may be a key.
            shown = ref if by_id else "the key given"
            raise KeyNotFound(f"No API key matches {shown}", {"key_id": ref} if by_id else {})
        return row

    def _find_hash(self, prefix: str) -> KeyRow | None:
        rows = self._store.rows(hash_prefix=prefix)
        return rows[0] if len(rows) == 1 else None

    def _stored(self, outcome: WriteOutcome) -> None:
        if isinstance(outcome, Refused):
            # Imported here: it loads the ingest service (and the registry's models under
            # it), which `promptrail keys create` on the store itself would pay at its start.
            from .refused_writes import raise_if_refused

            raise_if_refused(outcome, self._retry_after, "keys")

    def _forget(self, digests: list[str]) -> None:
        if self._cache is not None:
            self._cache.forget(digests)

    def _info(self, row: KeyRow) -> KeyInfo:
        status: KeyStatus = "active"
        if row.revoked_now or row.refused_from is not None:
            status = "revoked" if _refused_now(row) else "expiring"
        if status != "revoked" and row.expires_at and row.expires_at.timestamp() <= time.time():
            status = "expired"
        with self._used_lock:
            unwritten = self._used.get(row.key_hash)
        last_used = row.last_used_at
        if unwritten is not None:
            here = datetime.fromtimestamp(unwritten, UTC)
            last_used = max(last_used, here) if last_used else here
        return KeyInfo(
            key_id=key_id(row.key_hash),
            project=row.project,
            prefix=row.key_prefix,
            name=row.name,
            scopes=[scope for scope in SCOPES if scope in row.scopes],
            created_at=row.created_at,
            created_by=row.created_by,
            last_used_at=last_used,
            expires_at=row.expires_at,
            status=status,
            revoked_at=row.refused_from,
        )

    # -- last use --------------------------------------------------------------------------

    def _note_use(self, digest: str, now: float) -> None:
        with self._used_lock:
            self._used[digest] = now

    def write_usage(self) -> int:
        """Store the last use of every key used since the last write; return how many."""
        with self._used_lock:
            used, self._used = self._used, {}
        # Refused until the store says otherwise: a write that raises (a bug) keeps them too.
        outcome: WriteOutcome = Refused(busy=False, message="not written")
        try:
            outcome = self._store.record_use(
                {digest: datetime.fromtimestamp(at, UTC) for digest, at in used.items()}
            )
        finally:
            if isinstance(outcome, Refused):
                with self._used_lock:  # kept for the next write, unless a newer use replaced it
                    self._used = {**used, **self._used}
        self._stored(outcome)
        return len(used)

    def start(self) -> None:
        """Write the keys' last use in the background, every minute."""
        self._writer = threading.Thread(target=self._write_loop, name="key-usage", daemon=True)
        self._writer.start()

    def close(self) -> None:
        """Stop the background writer and write what is left (the collector is stopping)."""
        self._stop.set()
        if self._writer is not None:
            self._writer.join(10)
        try:
            self.write_usage()
        except Exception:
            logger.exception("keys: writing the last use of keys failed")

    def _write_loop(self) -> None:
        while not self._stop.wait(USAGE_WRITE_SECONDS):
            try:
                self.write_usage()
            except Exception:
                # The store may be busy or closing: the uses are kept for the next round.
                logger.exception("keys: writing the last use of keys failed")


def _check_project(project: str) -> None:
    if not _PROJECT.fullmatch(project):
        raise ValidationFailed("project", "project must be 1-64 letters, digits, '_', '.', or '-'")


def created_key(keys: KeyService, body: KeyCreate, created_by: str = "cli") -> KeyCreated:
    """Make the key ``promptrail keys create`` asks for (every scope unless it names some)."""
    issued = keys.issue(
        body.project,
        body.scopes or ALL_SCOPES,
        expires_in=body.expires_in,
        created_by=created_by,
        name=body.name,
    )
    return KeyCreated(
        project=issued.info.project,
        api_key=issued.api_key,
        key_id=issued.info.key_id,
        scopes=issued.info.scopes,
        expires_at=issued.info.expires_at,
        name=issued.info.name,
    )
