"""The audit log (docs/security.md, "Audit log"): who wrote what, hash-chained for the instance.

Every audited write appends one entry ``{"id", "at", "actor", "role", "project", "action",
"resource_type", "resource_id", "before"?, "after"?, "ip", "prev_hash", "hash"}``, where
``hash`` is the SHA-256 (hex) of ``prev_hash`` followed by the entry's canonical JSON without
``hash``, and the first entry's ``prev_hash`` is 64 zeros. Canonical JSON is
``json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` encoded as
UTF-8: anyone can recompute the chain with their own tool.

Appends are serialized by the store's chain lock, which also keeps the chain's head (the
newest seq and hash) in memory: on the embedded store an append costs a journal append and
no read (``store/audit.py``).
Secrets never reach an entry: every ``before`` and ``after`` passes :func:`redact`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..access.principal import Principal
from ..errors import ValidationFailed
from ..store.audit import AuditFilter, AuditRow, AuditStore
from ..store.keys import KeyStore
from ..store.writes import Refused

logger = logging.getLogger("promptrail.audit")

GENESIS = "0" * 64
"""The ``prev_hash`` of the chain's first entry."""

REDACTED = "[redacted]"

# Fields whose values are secrets wherever they appear in a resource's object: a connection's
# key and header values, a key's secret, a password, a hash of one, a session's tokens.
SECRET_FIELDS = frozenset(
    {
        "api_key",
        "key",
        "secret",
        "client_secret",
        "password",
        "password_hash",
        "key_hash",
        "token",
        "csrf_token",
        "authorization",
    }
)
# Fields whose value is a mapping of names to secrets (a connection's extra headers): the names
# stay, every value is redacted.
SECRET_MAPS = frozenset({"headers", "extra_headers"})


def canonical(value: Any) -> str:
    """The canonical JSON of an entry: sorted keys, no spaces, UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(prev_hash: str, entry_json: str) -> str:
    """SHA-256 (hex) of the previous entry's hash followed by this entry's canonical JSON."""
    return hashlib.sha256((prev_hash + entry_json).encode("utf-8")).hexdigest()


def redact(value: Any) -> Any:
    """``value`` (a resource's public object, as JSON) with every secret replaced.

    The one redaction of the audit log: a field named in :data:`SECRET_FIELDS` keeps only
    that it was set, a mapping named in :data:`SECRET_MAPS` keeps its keys.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = str(k).lower()
            if name in SECRET_FIELDS and v not in (None, ""):
                out[str(k)] = REDACTED
            elif name in SECRET_MAPS and isinstance(v, Mapping):
                out[str(k)] = {str(h): REDACTED for h in v}
            else:
                out[str(k)] = redact(v)
        return out
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


@dataclass(frozen=True)
class Actor:
    """Who made a write: a signed-in user (with its e-mail) or a key (with its hint)."""

    type: str  # "user" | "key"
    id: str
    email: str | None = None
    key_hint: str | None = None

    def as_json(self) -> dict[str, str]:
        """The entry's ``actor`` object."""
        out = {"type": self.type, "id": self.id}
        if self.email is not None:
            out["email"] = self.email
        if self.key_hint is not None:
            out["key_hint"] = self.key_hint
        return out


@dataclass(frozen=True)
class Problem:
    """The first entry of a chain that does not match, and why."""

    seq: int
    id: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """What :func:`verify_chain` found: entries checked, the head, the first problem."""

    checked: int
    head: str
    problem: Problem | None

    def as_json(self) -> dict[str, Any]:
        """The verdict as the loopback route answers it and ``promptrail audit verify`` reads it."""
        problem = self.problem
        return {
            "checked": self.checked,
            "head": self.head,
            "problem": None
            if problem is None
            else {"seq": problem.seq, "id": problem.id, "reason": problem.reason},
        }


def verify_chain(rows: Iterable[AuditRow]) -> Verdict:
    """Recompute the chain over ``rows`` (oldest first) and name the first entry that fails.

    An edited entry fails its own hash; a removed one leaves a gap in ``seq`` and its
    successor's ``prev_hash`` pointing at nothing; swapped entries break ``prev_hash``.
    """
    prev = GENESIS
    checked = 0
    for row in rows:
        expected = checked + 1
        problem = _check(row, expected, prev)
        if problem is not None:
            return Verdict(checked, prev, Problem(row.seq, row.id, problem))
        prev = row.hash
        checked += 1
    return Verdict(checked, prev, None)


def _check(row: AuditRow, expected_seq: int, prev: str) -> str | None:
    if row.seq != expected_seq:
        if row.seq > expected_seq:
            return f"entry {expected_seq} is missing (the chain jumps to {row.seq})"
        return f"entry {row.seq} appears twice"
    try:
        entry = json.loads(row.entry)
    except ValueError:
        return "its stored JSON does not parse"
    if not isinstance(entry, dict) or "hash" in entry:
        return "its stored JSON is not an entry"
    if entry.get("prev_hash") != prev:
        return "its prev_hash is not the previous entry's hash (moved, or one before it removed)"
    if chain_hash(prev, canonical(entry)) != row.hash:
        return "its hash does not match its content (edited)"
    actor = entry.get("actor")
    columns = (entry.get("id"), entry.get("project"), entry.get("resource_type"))
    if columns != (row.id, row.project, row.resource_type) or (
        entry.get("resource_id") != row.resource_id
        or not isinstance(actor, dict)
        or actor.get("id") != row.actor
    ):
        return "its indexed columns differ from its hashed content (edited)"
    return None


def entry_of(row: AuditRow) -> dict[str, Any]:
    """The entry as the list answers it: the hashed JSON with its hash."""
    entry: dict[str, Any] = json.loads(row.entry)
    entry["hash"] = row.hash
    return entry


class AuditService:
    """Appends audited writes to the one chain and lists them (docs/security.md, "Audit log")."""

    def __init__(self, store: AuditStore, key_hint: Callable[[str], str]) -> None:
        self._store = store
        self._key_hint = key_hint
        self._hints: dict[str, str] = {}

    @property
    def store(self) -> AuditStore:
        """The audit table's store (read by ``promptrail audit verify``)."""
        return self._store

    def cheap(self, principal: Principal) -> bool:
        """Whether :meth:`record` for ``principal`` needs no store round trip (its key's hint
        known, the append kept in memory and a journal): safe to call on the event loop."""
        known = principal.key_id is None or principal.key_id in self._hints
        return known and self._store.appends_in_memory

    def actor(self, principal: Principal, email: str | None) -> Actor:
        """The actor of a principal: a user (``email`` from its session) or a key and its hint."""
        if principal.key_id is not None:
            hint = self._hints.get(principal.key_id)
            if hint is None:
                hint = self._hints[principal.key_id] = self._key_hint(principal.key_id)
            return Actor("key", principal.key_id, key_hint=hint)
        return Actor("user", principal.user_id or "", email=email)

    def record(
        self,
        principal: Principal,
        action: str,
        resource_type: str,
        resource_id: str,
        *,
        before: Any = None,
        after: Any = None,
        ip: str = "",
        email: str | None = None,
    ) -> dict[str, Any] | None:
        """Append one entry for a write ``principal`` made; return it (None: not stored).

        ``before`` and ``after`` are the resource's public objects (None: it did not exist);
        they are redacted here. A store outage loses the entry, logged at ERROR with its
        content, and leaves the chain whole: the write it describes has already happened.
        """
        actor = self.actor(principal, email)
        at = datetime.now(UTC)
        entry: dict[str, Any] = {
            "id": f"aud_{uuid.uuid4().hex}",
            "at": at.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "actor": actor.as_json(),
            "role": principal.role,
            "project": principal.project,
            "action": action,
            "resource_type": resource_type,
            "resource_id": resource_id,
            "ip": ip,
        }
        if before is not None:
            entry["before"] = redact(before)
        if after is not None:
            entry["after"] = redact(after)

        def make(seq: int, prev: str) -> AuditRow:
            entry["prev_hash"] = prev or GENESIS
            text = canonical(entry)
            return AuditRow(
                seq=seq,
                id=entry["id"],
                at=at,
                project=principal.project,
                actor=actor.id,
                resource_type=resource_type,
                resource_id=resource_id,
                entry=text,
                hash=chain_hash(entry["prev_hash"], text),
            )

        stored = self._store.append(make)
        if isinstance(stored, Refused):
            logger.error("audit entry not stored (%s): %s", stored.message, canonical(entry))
            return None
        entry["hash"] = stored.hash
        return entry

    def page(
        self, where: AuditFilter, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of entries, newest first, and the cursor of the next (None: the last)."""
        before = _seq_of(cursor) if cursor else None
        rows = self._store.page(
            AuditFilter(
                where.project,
                where.actor,
                where.resource_type,
                where.resource_id,
                where.since,
                where.until,
                before,
            ),
            limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = _cursor_of(rows[-1].seq) if more and rows else None
        return [entry_of(r) for r in rows], next_cursor

    def verify(self) -> Verdict:
        """Recompute the whole chain from the store."""
        return verify_chain(self._store.walk())

    def close(self) -> None:
        """Done: the store applies what it journaled."""
        self._store.close()


def key_hints(keys: KeyStore) -> Callable[[str], str]:
    """The hint of a key by its id: the stored prefix the key list shows (never the key)."""
    from .keys import key_id  # the key service imports nothing of this module

    def hint(wanted: str) -> str:
        for row in keys.rows():
            if key_id(row.key_hash) == wanted:
                return f"{row.key_prefix}…"
        return ""

    return hint


def _cursor_of(seq: int) -> str:
    return base64.urlsafe_b64encode(f"audit:{seq}".encode()).decode().rstrip("=")


def _seq_of(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = text.partition(":")
        if kind != "audit" or not number.isdigit():
            raise ValueError(cursor)
        return int(number)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationFailed("cursor", "cursor is not a cursor of this list") from None
