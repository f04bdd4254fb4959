"""``Client`` and ``AsyncClient``: the whole REST API of the collector.

>>> import promptrail
>>> with promptrail.Client() as client:  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL
...     tpl = client.prompts.template("greet", label="production")
...     text = tpl.render(name="Ada")
...     client.requests.log(prompt_name="greet", version=tpl.version, output="Hello Ada")
"""

from __future__ import annotations

from typing import Generic, TypeVar

import httpx

from ._closing import AsyncClosing, Closing
from ._http import DEFAULT_MAX_RETRIES, AsyncHTTP, HTTPSettings, SyncHTTP, resolve_settings
from ._resources import AsyncPrompts, AsyncRequests, AsyncScores, Prompts, Requests, Scores
from ._resources.datasets import AsyncDatasets, Datasets
from ._resources.experiments import AsyncExperiments, Experiments
from ._resources.traces import (
    AsyncSessions,
    AsyncTraces,
    AsyncUsers,
    Sessions,
    Traces,
    Users,
)
from ._templates import DEFAULT_TEMPLATE_TTL, TemplateCache, TemplateDisk

__all__ = ["AsyncClient", "Client"]

HTTPClient = TypeVar("HTTPClient", httpx.Client, httpx.AsyncClient)


class _BaseClient(Generic[HTTPClient]):
    """What :class:`Client` and :class:`AsyncClient` share, as httpx's ``BaseClient`` does:
    the arguments, the settings they resolve to and the template cache."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        template_ttl: float = DEFAULT_TEMPLATE_TTL,
        http_client: HTTPClient | None = None,
    ) -> None:
        self._settings = resolve_settings(api_key, base_url, timeout, max_retries)
        disk = TemplateDisk.open(self._settings.base_url, self._settings.api_key or "")
        self._templates = TemplateCache(template_ttl, disk)
        self._open(self._settings, http_client)

    def _open(self, settings: HTTPSettings, http_client: HTTPClient | None) -> None:
        """Build the HTTP plumbing and the resources (``prompts``, ``requests``, ``scores``)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """Return the collector's base URL."""
        return self._settings.base_url

    def clear_template_cache(self) -> None:
        """Forget every cached template, so the next fetch asks the collector."""
        self._templates.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"


class Client(_BaseClient[httpx.Client], Closing):
    """Talk to the collector's REST API: ``client.prompts``, ``client.requests``, ``client.scores``.

    ``api_key`` defaults to ``PROMPTRAIL_API_KEY`` and ``base_url`` to ``PROMPTRAIL_BASE_URL``
    (else ``http://127.0.0.1:8000``; a base URL may end in ``/api``). GETs are retried
    ``max_retries`` times on connection errors and 502/503/504. Templates are cached for
    ``template_ttl`` seconds. Pass ``http_client`` to bring your own ``httpx.Client`` (proxies,
    event hooks); it is left open on :meth:`close`.
    """

    def _open(self, settings: HTTPSettings, http_client: httpx.Client | None) -> None:
        self._http = SyncHTTP(settings, http_client)
        self.prompts = Prompts(self._http, self._templates)
        self.requests = Requests(self._http)
        self.scores = Scores(self._http)
        self.traces = Traces(self._http)
        self.sessions = Sessions(self._http)
        self.users = Users(self._http)
        self.datasets = Datasets(self._http)
        self.experiments = Experiments(self._http)

    def close(self) -> None:
        """Close the connections (not those of an ``http_client`` you passed in)."""
        self._http.close()


class AsyncClient(_BaseClient[httpx.AsyncClient], AsyncClosing):
    """Talk to the collector's REST API with ``await``; the same arguments as :class:`Client`.

    >>> async with promptrail.AsyncClient() as client:
    ...     prompt = await client.prompts.get("greet")
    ...     async for record in client.requests.list(prompt_name="greet"):
    ...         print(record.id)
    """

    def _open(self, settings: HTTPSettings, http_client: httpx.AsyncClient | None) -> None:
        self._http = AsyncHTTP(settings, http_client)
        self.prompts = AsyncPrompts(self._http, self._templates)
        self.requests = AsyncRequests(self._http)
        self.scores = AsyncScores(self._http)
        self.traces = AsyncTraces(self._http)
        self.sessions = AsyncSessions(self._http)
        self.users = AsyncUsers(self._http)
        self.datasets = AsyncDatasets(self._http)
        self.experiments = AsyncExperiments(self._http)

    async def aclose(self) -> None:
        """Close the connections (not those of an ``http_client`` you passed in)."""
        await self._http.aclose()
