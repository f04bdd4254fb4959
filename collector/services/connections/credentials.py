"""The credential order (docs/api-notes.md, "Connections"): which provider client, under which
credentials, serves a model a run, an experiment or a judge names.

1. ``<connection>/<model>``: the project's connection of that name; the provider gets
   ``<model>``, the record keeps the name as written.
2. The project's connection for the model's provider (the oldest, when several): an
   ``openai`` or ``anthropic`` connection serves that provider's models (only those in its
   ``models``, when it lists any); an ``openai_compatible`` one the models it lists.
3. The server's environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` and their base URLs).

A call through a connection is admitted first (:meth:`Credentials.admit`): its base URL's host
must still not resolve to a link-local address, and its month's spend must be under its budget.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime

import anyio

from ...providers import (
    Completion,
    CompletionRequest,
    HttpPolicy,
    Provider,
    ProviderEndpoint,
    ProviderFailure,
    StreamEvent,
)
from ...providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from ...providers.anthropic import AnthropicProvider
from ...providers.openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from ...providers.openai import OpenAIProvider
from ...providers.routing import provider_for
from ...store.connections import ConnectionRow
from .service import ConnectionService, Secrets
from .urls import acheck_host, parse_base_url


@dataclass(frozen=True)
class Route:
    """Where a model's call goes: the provider client, the provider's model name, and the
    connection whose credentials it uses (None: the server's environment)."""

    provider: Provider
    model: str
    connection: ConnectionRow | None = None


class _Redacting:
    """A connection's provider client whose failures never carry its secrets (a server that
    echoes a header or the key back in its error body)."""

    def __init__(self, inner: Provider, secrets: Secrets) -> None:
        self.name = inner.name
        self._inner = inner
        self._hidden = [s for s in (secrets.api_key, *secrets.headers.values()) if len(s) >= 4]

    def _clean(self, exc: ProviderFailure) -> ProviderFailure:
        message = exc.message.removeprefix(f"{exc.provider}: ")
        for secret in self._hidden:
            message = message.replace(secret, "[redacted]")
        return ProviderFailure(exc.provider, message, exc.status)

    async def complete(self, request: CompletionRequest) -> Completion:
        try:
            return await self._inner.complete(request)
        except ProviderFailure as exc:
            raise self._clean(exc) from None

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamEvent, None]:
        try:
            async with aclosing(self._inner.stream(request)) as events:
                async for event in events:
                    yield event
        except ProviderFailure as exc:
            raise self._clean(exc) from None

    async def aclose(self) -> None:
        await self._inner.aclose()


class Credentials:
    """Route models by the credential order; keep one pooled client per connection."""

    def __init__(
        self,
        connections: ConnectionService,
        environment: Mapping[str, Provider],
        policy: HttpPolicy,
    ) -> None:
        self._connections = connections
        self._environment = dict(environment)
        self._policy = policy
        # (project, name) -> (what the client was made from, the client)
        self._clients: dict[tuple[str, str], tuple[str, Provider]] = {}
        self._retired: list[Provider] = []

    async def aroute(self, project: str, model: str) -> Route | None:
        """Return the route of ``model`` for ``project``, or None when nothing serves it."""
        rows = self._connections.cached_rows(project)
        if rows is None:
            rows = await anyio.to_thread.run_sync(self._connections.rows, project)
        return self._route(project, model, rows)

    def route(self, project: str, model: str) -> Route | None:
        """:meth:`aroute` from a thread (or from the loop when the project is in memory)."""
        return self._route(project, model, self._connections.rows(project))

    def _route(self, project: str, model: str, rows: list[ConnectionRow]) -> Route | None:
        prefix, _, rest = model.partition("/")
        if rest:
            named = next((r for r in rows if r.name == prefix), None)
            if named is not None:
                return Route(self._client(project, named), rest, named)
        routed = provider_for(model)
        for row in rows:  # oldest first
            if row.provider == "openai_compatible":
                if model in row.models:
                    return Route(self._client(project, row), model, row)
            elif (
                routed is not None
                and row.provider == routed[0]
                and (not row.models or routed[1] in row.models or model in row.models)
            ):
                return Route(self._client(project, row), routed[1], row)
        if routed is None:
            return None
        return Route(self._environment[routed[0]], routed[1])

    def _client(self, project: str, row: ConnectionRow) -> Provider:
        made_from = f"{row.provider}\0{row.base_url}\0{row.key_id}\0{row.sealed}"
        key = (project, row.name)
        known = self._clients.get(key)
        if known is not None and known[0] == made_from:
            return known[1]
        secrets = self._connections.secrets(project, row)
        default = ANTHROPIC_BASE_URL if row.provider == "anthropic" else OPENAI_BASE_URL
        endpoint = ProviderEndpoint(
            row.base_url or default, secrets.api_key, tuple(secrets.headers.items())
        )
        inner: Provider = (
            AnthropicProvider(endpoint, self._policy)
            if row.provider == "anthropic"
            else OpenAIProvider(endpoint, self._policy)
        )
        client = _Redacting(inner, secrets)
        if known is not None:
            # A call may still be using the old one: it is closed with the others at the end.
            self._retired.append(known[1])
        self._clients[key] = (made_from, client)
        return client

    async def admit(self, project: str, connection: ConnectionRow) -> None:
        """Refuse a call through ``connection`` whose base URL now resolves to a link-local
        address (400 naming ``base_url``) or whose month's spend has reached its budget (402
        BUDGET_EXCEEDED); nothing is sent to the provider."""
        if connection.base_url is not None:
            await acheck_host(parse_base_url(connection.base_url)[1])
        await self._connections.spend.admit(project, connection.name, connection.monthly_budget_usd)

    def charge(self, project: str, name: str, cost: float, at: datetime) -> None:
        """Count a finished call through a connection: its cost, and its last use."""
        self._connections.spend.charge(project, name, cost, at)
        self._connections.mark_used(project, name)

    async def aclose(self) -> None:
        """Close every connection's pooled client."""
        for provider in [*(c for _, c in self._clients.values()), *self._retired]:
            await provider.aclose()
        self._clients.clear()
        self._retired.clear()
