"""API keys: stored only as SHA-256 hashes, one project per key; revocations and last use."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from ..access.principal import SCOPES, Scope
from .schema import Table, quote
from .writes import WriteOutcome, direct_write

# The key table as made before keys had scopes (migration 1; migration 30 adds the rest).
API_KEYS_BEFORE_30 = Table(
    name="api_keys",
    columns=(
        "key_hash String",
        "project String",
        "key_prefix String",
        "created_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    order_by="key_hash",
)

# Point lookups by hash on every request: the hash leads the sort key. A key made before
# scopes existed reads (and, once its part is rewritten, stores) every scope, as it could do
# everything (docs/api-notes.md, "Keys and scopes"); every key made since names its own.
API_KEYS = Table(
    name="api_keys",
    columns=(
        *API_KEYS_BEFORE_30.columns,
        f"scopes Array(String) DEFAULT [{', '.join(repr(s) for s in SCOPES)}]",
        "expires_at Nullable(DateTime64(3, 'UTC')) DEFAULT NULL",
        "created_by String DEFAULT ''",
        "name String DEFAULT ''",
    ),
    engine="ReplacingMergeTree",
    order_by="key_hash",
)

# A revocation is a row of its own, never an update of the key's row: rows are only added,
# so two collectors revoking or rotating at once cannot undo each other, and a retried insert
# is harmless. A key is refused from the earliest ``revoked_at + grace_seconds`` of its rows;
# a row with no grace refuses it at once, whatever the clocks of the collectors say.
API_KEY_REVOCATIONS = Table(
    name="api_key_revocations",
    columns=(
        "key_hash String",
        "project String",
        "revoked_at DateTime64(3, 'UTC')",
        "grace_seconds UInt32",
    ),
    order_by="key_hash",
)

# When each key was last used, written by each collector at most once a minute per key (see
# services/keys.py); the replacing merge keeps the latest, reads take the max.
API_KEY_USAGE = Table(
    name="api_key_usage",
    columns=("key_hash String", "last_used_at DateTime64(3, 'UTC')"),
    engine="ReplacingMergeTree",
    engine_args=("last_used_at",),
    order_by="key_hash",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class KeyState:
    """What a request's key check reads each time: the project, whether and when it is
    refused."""

    project: str
    # The earliest moment a revocation refuses the key from (None: never revoked).
    refused_from: datetime | None
    # Whether a revocation without grace refuses it now, whatever the clock says.
    revoked_now: bool


@dataclass(frozen=True)
class KeyGrants:
    """What a key may do and until when: fixed when it is made, so read once per process."""

    scopes: frozenset[Scope]
    # When the key stops working by itself (None: never).
    expires_at: datetime | None


@dataclass(frozen=True)
class KeyRow(KeyState):
    """One key as ``promptrail keys list`` shows it (never the key, never its whole hash)."""

    key_hash: str
    key_prefix: str
    created_at: datetime
    last_used_at: datetime | None
    created_by: str
    name: str
    scopes: frozenset[Scope]
    expires_at: datetime | None


@dataclass(frozen=True)
class NewKey:
    """A key to store: its hash, never the key."""

    key_hash: str
    project: str
    key_prefix: str
    created_at: datetime
    scopes: frozenset[Scope]
    expires_at: datetime | None = None
    created_by: str = ""
    name: str = ""


def _scopes(values: Any) -> frozenset[Scope]:
    # Only names the code knows: a store written by a newer release may know more.
    return frozenset(s for s in SCOPES if s in set(values))


def _time(milliseconds: Any) -> datetime | None:
    return None if milliseconds is None else _EPOCH + timedelta(milliseconds=int(milliseconds))


class KeyStore:
    """Reads and writes ``api_keys``, ``api_key_revocations`` and ``api_key_usage``."""

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._table = f"{db}.{quote(API_KEYS.name)}"
        self._revocations = f"{db}.{quote(API_KEY_REVOCATIONS.name)}"
        self._usage = f"{db}.{quote(API_KEY_USAGE.name)}"
        # On a cluster a revocation must be seen by the next check whichever replica answers
        # it: quorum inserts plus sequentially consistent reads give that (as the registry's
        # compare-and-set read-backs do, store/prompts.py).
        self._write_settings: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._check_settings: dict[str, Any] = {
            "max_threads": 1,
            **({"select_sequential_consistency": 1} if cluster else {}),
        }
        # The revocations of each key, folded to one row: when it is refused, and whether
        # a revocation without grace refuses it at once.
        self._refusals = (
            "SELECT key_hash, "
            "toUnixTimestamp64Milli(minOrNull(revoked_at + toIntervalSecond(grace_seconds))) "
            "AS refused_from, max(grace_seconds = 0) AS revoked_now "
            f"FROM {self._revocations}"
        )

    def insert(self, key: NewKey) -> WriteOutcome:
        """Store one key (its hash) for a project.

        Every write of this store answers :data:`~.writes.STORED`, or :class:`~.writes.Refused`
        on a store outage (the service answers its 503); a bug is raised. A refused write
        stored nothing; rows are only added, so a retry is harmless.
        """
        row = [
            key.key_hash,
            key.project,
            key.key_prefix,
            key.created_at,
            sorted(key.scopes, key=SCOPES.index),
            key.expires_at,
            key.created_by,
            key.name,
        ]
        return direct_write(
            lambda: self._client.insert(
                self._table,
                [row],
                column_names=API_KEYS.inserted_columns(),
                settings=self._write_settings,
            )
        )

    def state(self, key_hash: str) -> KeyState | None:
        """Return the project of a key and its revocation, in one query; None if unknown."""
        # A UNION of two point reads, not a JOIN: a JOIN builds a hash table per query, which
        # made this check (run on every request on a server) markedly slower, the more so
        # on a busy machine (docs/benchmarks.md, "API key checks").
        # Only the columns that change (by a revocation) or are needed at once: a key's scopes
        # and expiry never change, and each column read costs (docs/benchmarks.md, "API key
        # checks"), so they are read once by :meth:`grants`.
        rows = self._client.query(
            "SELECT 1 AS is_key, project, toInt64(0) AS refused_from, 0 AS revoked_now "
            f"FROM {self._table} WHERE key_hash = {{h:String}} "
            "UNION ALL SELECT 0, project, "
            "toUnixTimestamp64Milli(revoked_at + toIntervalSecond(grace_seconds)), "
            f"grace_seconds = 0 FROM {self._revocations} WHERE key_hash = {{h:String}}",
            parameters={"h": key_hash},
            settings=self._check_settings,
        ).result_rows
        projects = [str(row[1]) for row in rows if row[0]]
        if not projects:
            return None
        ends = [int(row[2]) for row in rows if not row[0]]
        return KeyState(
            projects[0],
            _time(min(ends)) if ends else None,
            any(row[3] for row in rows if not row[0]),
        )

    def grants(self, key_hash: str) -> KeyGrants | None:
        """Return a key's scopes and expiry (fixed when it was made); None if unknown."""
        rows = self._client.query(
            "SELECT scopes, toUnixTimestamp64Milli(expires_at) "
            f"FROM {self._table} WHERE key_hash = {{h:String}} LIMIT 1",
            parameters={"h": key_hash},
            settings=self._check_settings,
        ).result_rows
        if not rows:
            return None
        return KeyGrants(_scopes(rows[0][0]), _time(rows[0][1]))

    def rows(self, project: str | None = None, hash_prefix: str | None = None) -> list[KeyRow]:
        """Return the keys of one project (or all), or those whose hash starts so."""
        rows = self._client.query(
            "SELECT k.project, r.refused_from, r.revoked_now, k.key_hash, k.key_prefix, "
            "toUnixTimestamp64Milli(k.created_at), toUnixTimestamp64Milli(u.last_used_at), "
            "k.scopes, toUnixTimestamp64Milli(k.expires_at), k.created_by, k.name "
            f"FROM {self._table} AS k FINAL "
            f"LEFT JOIN ({self._refusals} GROUP BY key_hash) AS r ON r.key_hash = k.key_hash "
            "LEFT JOIN (SELECT key_hash, maxOrNull(last_used_at) AS last_used_at "
            f"FROM {self._usage} GROUP BY key_hash) AS u ON u.key_hash = k.key_hash "
            "WHERE ({project:String} = '' OR k.project = {project:String}) "
            "AND startsWith(k.key_hash, {prefix:String}) "
            "ORDER BY k.project, k.created_at, k.key_hash",
            parameters={"project": project or "", "prefix": hash_prefix or ""},
        ).result_rows
        return [
            KeyRow(
                project=str(row[0]),
                refused_from=_time(row[1]),
                revoked_now=bool(row[2]),
                key_hash=str(row[3]),
                key_prefix=str(row[4]),
                created_at=_time(row[5]) or _EPOCH,
                last_used_at=_time(row[6]),
                scopes=_scopes(row[7]),
                expires_at=_time(row[8]),
                created_by=str(row[9]),
                name=str(row[10]),
            )
            for row in rows
        ]

    def revoke(
        self, keys: Iterable[tuple[str, str]], at: datetime, grace_seconds: int
    ) -> WriteOutcome:
        """Refuse each ``(key_hash, project)`` from ``at + grace_seconds`` on; answers as
        :meth:`insert` does."""
        rows = [[key_hash, project, at, grace_seconds] for key_hash, project in keys]
        return direct_write(lambda: self._insert_rows(self._revocations, rows, revocation=True))

    def record_use(self, last_used: dict[str, datetime]) -> WriteOutcome:
        """Store when each key (by hash) was last used; answers as :meth:`insert` does."""
        rows = [[key_hash, at] for key_hash, at in last_used.items()]
        return direct_write(lambda: self._insert_rows(self._usage, rows, revocation=False))

    def _insert_rows(self, table: str, rows: list[list[Any]], revocation: bool) -> None:
        if not rows:
            return
        self._client.insert(
            table,
            rows,
            column_names=(API_KEY_REVOCATIONS if revocation else API_KEY_USAGE).inserted_columns(),
            settings=self._write_settings if revocation else None,
        )

    def count_for(self, project: str) -> int:
        """Count the keys of a project (revoked ones too)."""
        rows = self._client.query(
            f"SELECT count() FROM {self._table} WHERE project = {{p:String}}",
            parameters={"p": project},
        ).result_rows
        return int(rows[0][0])

    def projects(self) -> set[str]:
        """Return every project that has a key (revoked ones too), in one light read.

        The collector's start reads the chat versions of these projects: the names alone,
        without :meth:`rows`' joins of revocations and last use (about a tenth of its CPU).
        """
        rows = self._client.query(f"SELECT DISTINCT project FROM {self._table}").result_rows
        return {str(row[0]) for row in rows}
