"""Provider connections (docs/api-notes.md, "Connections"): the rules between routes and store.

Names are unique per project (409 CONNECTION_ALREADY_EXISTS); an unknown one is 404
CONNECTION_NOT_FOUND. The API key and the header values are sealed before they reach the
store (:mod:`.sealing`) and opened only to make a call; what the API shows is the key's hint
and the headers' names. A project's connections are kept in memory for :data:`CACHE_SECONDS`
(the credential order reads them on every run) and dropped at once by a write here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import anyio

from ...errors import ConnectionAlreadyExists, ConnectionNotFound, ValidationFailed
from ...models.connections import ConnectionIn, ConnectionOut, ConnectionPatch
from ...store.connections import ConnectionRow, ConnectionStore
from ...store.writes import PendingWrites
from ..refused_writes import raise_if_refused
from .budget import SpendBook
from .check import CheckResult, check_connection
from .sealing import KeySource, SealBroken, Sealer, seal_context
from .urls import acheck_host, check_host, parse_base_url

logger = logging.getLogger("promptrail.connections")

CACHE_SECONDS = 5.0
# When a connection was last used is stored at most this often per connection.
_USE_WRITE_SECONDS = 60.0


@dataclass(frozen=True)
class Secrets:
    """A connection's secrets in the clear: only ever in memory, to make a call."""

    api_key: str
    headers: dict[str, str]

    def __repr__(self) -> str:  # never in a log line or a traceback's locals
        return "Secrets(…)"


def key_hint(api_key: str) -> str:
    """Return ``"…"`` and the key's last 4 characters (``"…"`` alone for a key under 12)."""
    return "…" + api_key[-4:] if len(api_key) >= 12 else "…"


def _now_ms() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class ConnectionService:
    """Create, list, read, change and delete connections; open their secrets for a call."""

    def __init__(
        self,
        store: ConnectionStore,
        keys: KeySource | None,
        spend: SpendBook,
        pending: PendingWrites,
        retry_after_seconds: int = 2,
    ) -> None:
        """``keys`` None (a server store without PROMPTRAIL_SECRET_KEY): connections refused."""
        self._store = store
        self.keys = keys
        self._sealer = Sealer(keys.key, keys.previous) if keys is not None else None
        self.spend = spend
        self._pending = pending
        self._retry_after = retry_after_seconds
        self._cache: dict[str, tuple[float, list[ConnectionRow]]] = {}
        self._used: dict[tuple[str, str], datetime] = {}
        self._used_written: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    # -- reads -----------------------------------------------------------------------------

    def rows(self, project: str) -> list[ConnectionRow]:
        """Return the project's live connections, oldest first (kept for a few seconds)."""
        cached = self._cache.get(project)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        rows = [row for _, row in self._store.all(project)]
        self._cache[project] = (time.monotonic(), rows)
        return rows

    def cached_rows(self, project: str) -> list[ConnectionRow] | None:
        """The project's connections when they are in memory and fresh, else None."""
        cached = self._cache.get(project)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        return None

    def find(self, project: str, name: str) -> ConnectionRow | None:
        """Return the live connection ``name`` of the project, or None."""
        return next((r for r in self.rows(project) if r.name == name), None)

    def _get(self, project: str, name: str) -> ConnectionRow:
        # Writes and single reads go to the store, not the cache: they must see the latest.
        self._cache.pop(project, None)
        row = self.find(project, name)
        if row is None:
            raise ConnectionNotFound(name)
        return row

    def get(self, project: str, name: str) -> ConnectionOut:
        """Return one connection as the API shows it; 404 CONNECTION_NOT_FOUND."""
        row = self._get(project, name)
        return self._out(project, row, self._store.last_used(project).get(name))

    def list_all(self, project: str) -> list[ConnectionOut]:
        """Return every connection of the project as the API shows them, oldest first."""
        self._cache.pop(project, None)
        used = self._store.last_used(project)
        return [self._out(project, row, used.get(row.name)) for row in self.rows(project)]

    def _out(self, project: str, row: ConnectionRow, stored_use: datetime | None) -> ConnectionOut:
        used = [t for t in (stored_use, self._used.get((project, row.name))) if t is not None]
        return ConnectionOut(
            name=row.name,
            provider=row.provider,
            base_url=row.base_url,
            models=list(row.models),
            header_names=list(row.header_names),
            api_key_hint=row.api_key_hint,
            monthly_budget_usd=row.monthly_budget_usd,
            spend_this_month_usd=round(self.spend.spent(project, row.name), 10),
            created_at=row.created_at,
            updated_at=row.updated_at,
            last_used_at=max(used) if used else None,
        )

    def secrets(self, project: str, row: ConnectionRow) -> Secrets:
        """Open a connection's secrets; a 400 naming ``connection`` when they do not open."""
        if self._sealer is None:
            raise self._no_key()
        try:
            raw = self._sealer.open(row.sealed, row.key_id, seal_context(project, row.name))
        except SealBroken:
            raise ValidationFailed(
                "connection",
                f"Connection '{row.name}' cannot be opened with this collector's secret key "
                "(it was sealed under another one): set its api_key again",
                connection=row.name,
            ) from None
        data = json.loads(raw)
        return Secrets(str(data["api_key"]), dict(data.get("headers") or {}))

    async def check(self, project: str, name: str) -> CheckResult:
        """Make the connection's one minimal call (docs/api-notes.md, Connections)."""
        row = await anyio.to_thread.run_sync(self._get, project, name)
        if row.base_url is not None:
            await acheck_host(parse_base_url(row.base_url)[1])
        secrets = self.secrets(project, row)
        return await check_connection(row, secrets.api_key, secrets.headers)

    # -- writes ----------------------------------------------------------------------------

    def create(self, project: str, body: ConnectionIn) -> ConnectionOut:
        """Store a new connection; 409 when a live one has the name."""
        base_url = _base_url(body.provider, body.base_url)
        if self._get_or_none(project, body.name) is not None:
            raise ConnectionAlreadyExists(body.name)
        now = _now_ms()
        row = ConnectionRow(
            name=body.name,
            provider=body.provider,
            base_url=base_url,
            models=tuple(body.models),
            header_names=tuple(body.headers),
            api_key_hint=key_hint(body.api_key),
            monthly_budget_usd=body.monthly_budget_usd,
            key_id="",
            sealed="",
            created_at=now,
            updated_at=now,
        )
        row = self._sealed(project, row, Secrets(body.api_key, dict(body.headers)))
        self._put(project, row)
        return self._out(project, row, None)

    def update(self, project: str, name: str, body: ConnectionPatch) -> ConnectionOut:
        """Change the fields ``body`` gives; the secrets not given stay as they were."""
        row = self._get(project, name)
        given = body.model_fields_set
        provider = body.provider if body.provider is not None else row.provider
        base_url = body.base_url if "base_url" in given else row.base_url
        changed = replace(
            row,
            provider=provider,
            base_url=_base_url(provider, base_url),
            updated_at=_now_ms(),
            models=tuple(body.models or ()) if "models" in given else row.models,
            monthly_budget_usd=body.monthly_budget_usd
            if "monthly_budget_usd" in given
            else row.monthly_budget_usd,
        )
        if "api_key" in given and body.api_key is None:
            raise ValidationFailed("api_key", "api_key cannot be removed; set a new one")
        if body.api_key is not None or "headers" in given:
            try:
                old = self.secrets(project, row)
            except ValidationFailed:
                # Sealed under a lost key: a new key (and headers, when it had some) replace
                # what no longer opens.
                if body.api_key is None or ("headers" not in given and row.header_names):
                    raise
                old = Secrets(body.api_key, {})
            headers = dict(body.headers or {}) if "headers" in given else old.headers
            api_key = body.api_key if body.api_key is not None else old.api_key
            changed = replace(changed, header_names=tuple(headers), api_key_hint=key_hint(api_key))
            changed = self._sealed(project, changed, Secrets(api_key, headers))
        self._put(project, changed)
        return self._out(project, changed, self._store.last_used(project).get(name))

    def delete(self, project: str, name: str) -> ConnectionOut:
        """Delete a connection; return what it was."""
        row = self._get(project, name)
        shown = self._out(project, row, self._store.last_used(project).get(name))
        self._put(project, row, deleted=True)
        self.spend.forget(project, name)
        return shown

    def reseal(self) -> int:
        """Seal again under the current key every connection sealed under a previous one (a
        key rotation, docs/security.md); return how many. Those no key opens stay as they are."""
        if self._sealer is None:
            return 0
        current = self._sealer.key_id
        rows: list[tuple[str, ConnectionRow]] = []
        for project, row in self._store.all(None):
            if row.key_id == current:
                continue
            try:
                rows.append((project, self._sealed(project, row, self.secrets(project, row))))
            except ValidationFailed:
                logger.warning("connection %s of project %s: no key opens it", row.name, project)
        if rows:
            raise_if_refused(self._store.put_many(rows), self._retry_after, "resealed connections")
            self._cache.clear()
        return len(rows)

    def mark_used(self, project: str, name: str) -> None:
        """Note a call through the connection (stored at most once a minute per connection)."""
        key = (project, name)
        self._used[key] = _now_ms()
        now = time.monotonic()
        with self._lock:
            if now - self._used_written.get(key, -_USE_WRITE_SECONDS) < _USE_WRITE_SECONDS:
                return
            self._used_written[key] = now
        at = self._used[key]
        self._pending.submit(
            project, f"last use of connection {name}", lambda: self._store.used(project, name, at)
        )

    def _get_or_none(self, project: str, name: str) -> ConnectionRow | None:
        self._cache.pop(project, None)
        return self.find(project, name)

    def _sealed(self, project: str, row: ConnectionRow, secrets: Secrets) -> ConnectionRow:
        if self._sealer is None:
            raise self._no_key()
        plain = json.dumps({"api_key": secrets.api_key, "headers": secrets.headers}).encode()
        sealed = self._sealer.seal(plain, seal_context(project, row.name))
        return replace(row, key_id=self._sealer.key_id, sealed=sealed)

    def _put(self, project: str, row: ConnectionRow, deleted: bool = False) -> None:
        outcome = self._store.put(project, row, deleted)
        self._cache.pop(project, None)
        raise_if_refused(outcome, self._retry_after, f"connection {row.name}")

    @staticmethod
    def _no_key() -> ValidationFailed:
        return ValidationFailed(
            "api_key",
            "Connections need PROMPTRAIL_SECRET_KEY (32 bytes, base64) on a ClickHouse server "
            "store: the collector has no key to seal their secrets with",
        )


def _base_url(provider: str, base_url: str | None) -> str | None:
    """Check a connection's base URL (http(s), not link-local); openai_compatible needs one."""
    if base_url is None:
        if provider == "openai_compatible":
            raise ValidationFailed("base_url", "an openai_compatible connection needs a base_url")
        return None
    url, host = parse_base_url(base_url)
    check_host(host)
    return url
