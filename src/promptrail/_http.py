"""The HTTP plumbing both clients share: settings, auth header, retries, typed errors.

Only GETs are retried (on connection errors and 429/502/503/504, with jittered backoff, or
after the collector's ``Retry-After`` when it sends one): a POST that timed out may have been
stored, and sending it again could store it twice. A POST refused with 503 or 429 raises an
error whose ``retry_after`` says when to send it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ._api_call import Call, Page
from ._errors import APIConnectionError, APITimeoutError, PromptrailError, error_class_for
from ._retry import RetryPolicy, retry_after
from ._settings import base_url_or_environment, current
from ._version import __version__

T = TypeVar("T")

# Runs wait on a model: allow a long read, but find a dead collector quickly.
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
DEFAULT_MAX_RETRIES = 2
RETRY_STATUSES = frozenset({429, 502, 503, 504})
# Backoff from 0.25 s up to 4 s; the longest Retry-After a retry waits for is 30 s (a longer
# one is the caller's to honour: the error's ``retry_after`` says it).
_RETRY = RetryPolicy(base=0.25, ceiling=4.0, retry_after_max=30.0)


USER_AGENT = f"promptrail-python/{__version__}"


@dataclass(frozen=True)
class HTTPSettings:
    """Where the collector is and how to talk to it."""

    base_url: str
    api_key: str | None
    timeout: httpx.Timeout
    max_retries: int


def resolve_settings(
    api_key: str | None,
    base_url: str | None,
    timeout: float | httpx.Timeout | None,
    max_retries: int,
) -> HTTPSettings:
    """Fill what the caller left out from ``PROMPTRAIL_API_KEY`` / ``PROMPTRAIL_BASE_URL``."""
    url = base_url_or_environment(base_url)
    url = url.rstrip("/")
    # Paths start with /v1; a base URL given with it (".../v1") would double it.
    url = url.removesuffix("/v1")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    elif not isinstance(timeout, httpx.Timeout):
        timeout = httpx.Timeout(timeout)
    if max_retries < 0:
        raise ValueError("max_retries must be 0 or more")
    return HTTPSettings(
        base_url=url,
        api_key=api_key or current().api_key or None,
        timeout=timeout,
        max_retries=max_retries,
    )


def _headers(settings: HTTPSettings) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    return headers


def _build(
    client: httpx.Client | httpx.AsyncClient, settings: HTTPSettings, call: Call[Any]
) -> httpx.Request:
    return client.build_request(
        call.method,
        settings.base_url + call.path,
        params=call.params,
        json=call.body,
        headers=_headers(settings),
        timeout=settings.timeout,
    )


def error_from_response(response: httpx.Response, settings: HTTPSettings) -> PromptrailError:
    """Turn an error answer (read already) into the typed exception of its status."""
    error: Any = None
    try:
        document = response.json()
        error = document.get("error") if isinstance(document, dict) else None
    except ValueError:
        pass
    cls = error_class_for(response.status_code)
    retry_after = retry_after_seconds(response)
    if not isinstance(error, dict):
        # Not the collector talking: a proxy page, or another service at that address.
        text = response.text.strip()[:200] or response.reason_phrase
        return cls(
            f"HTTP {response.status_code} from {response.request.url}: {text}",
            status=response.status_code,
            code="HTTP_ERROR",
            retry_after=retry_after,
        )
    message = str(error.get("message") or response.reason_phrase)
    if response.status_code == 401 and not settings.api_key:
        message += " (no API key: pass api_key= or set PROMPTRAIL_API_KEY)"
    details = error.get("details")
    return cls(
        message,
        status=response.status_code,
        code=str(error.get("code") or ""),
        type=str(error.get("type") or ""),
        details=details if isinstance(details, dict) else {},
        retry_after=retry_after,
    )


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The ``Retry-After`` of a 429 or 503, in seconds (None: absent, a date, or another status)."""
    if response.status_code not in (429, 503):
        return None
    return retry_after(response)


def _pause(response: httpx.Response, attempt: int) -> float:
    """Wait as the collector asked (up to 30 s), else the backoff."""
    return _RETRY.pause(retry_after_seconds(response), attempt)


def _transport_error(exc: httpx.RequestError, settings: HTTPSettings) -> APIConnectionError:
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    what = "timed out" if cls is APITimeoutError else f"failed: {exc!r}"
    return cls(f"Request to the collector at {settings.base_url} {what}", code="CONNECTION_ERROR")


def _backoff(attempt: int) -> float:
    """Return the pause before retry ``attempt`` (1-based): exponential, equal jitter."""
    return _RETRY.backoff(attempt)


def _should_retry(call: Call[Any], attempt: int, settings: HTTPSettings) -> bool:
    return call.retryable and attempt < settings.max_retries


class SyncHTTP:
    """Send calls with an ``httpx.Client`` (the caller's, or one of our own)."""

    def __init__(self, settings: HTTPSettings, http_client: httpx.Client | None = None) -> None:
        self.settings = settings
        self._owns_client = http_client is None
        self._client = http_client or httpx.Client(timeout=settings.timeout)

    def call(self, call: Call[T]) -> T:
        """Send a call and parse its answer; raise the typed error of a failure."""
        return call.parse(self.send(call, stream=False))

    def send(self, call: Call[Any], *, stream: bool) -> httpx.Response:
        """Send a call (retrying GETs); return a successful answer, streaming or read."""
        attempt = 0
        while True:
            try:
                response = self._client.send(
                    _build(self._client, self.settings, call), stream=stream
                )
            except httpx.RequestError as exc:
                if isinstance(exc, httpx.TransportError) and _should_retry(
                    call, attempt, self.settings
                ):
                    attempt += 1
                    time.sleep(_backoff(attempt))
                    continue
                raise _transport_error(exc, self.settings) from exc
            if response.is_success:
                return response
            response.read()
            response.close()
            if response.status_code in RETRY_STATUSES and _should_retry(
                call, attempt, self.settings
            ):
                attempt += 1
                time.sleep(_pause(response, attempt))
                continue
            raise error_from_response(response, self.settings)

    def paginate(self, page_call: Callable[[str | None], Call[Page[T]]]) -> Iterator[T]:
        """Yield every item of a list, fetching the next page only when it is reached."""
        cursor: str | None = None
        while True:
            page = self.call(page_call(cursor))
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def close(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owns_client:
            self._client.close()


class AsyncHTTP:
    """Send calls with an ``httpx.AsyncClient`` (the caller's, or one of our own)."""

    def __init__(
        self, settings: HTTPSettings, http_client: httpx.AsyncClient | None = None
    ) -> None:
        self.settings = settings
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(timeout=settings.timeout)

    async def call(self, call: Call[T]) -> T:
        """Send a call and parse its answer; raise the typed error of a failure."""
        return call.parse(await self.send(call, stream=False))

    async def send(self, call: Call[Any], *, stream: bool) -> httpx.Response:
        """Send a call (retrying GETs); return a successful answer, streaming or read."""
        attempt = 0
        while True:
            try:
                request = _build(self._client, self.settings, call)
                response = await self._client.send(request, stream=stream)
            except httpx.RequestError as exc:
                if isinstance(exc, httpx.TransportError) and _should_retry(
                    call, attempt, self.settings
                ):
                    attempt += 1
                    await asyncio.sleep(_backoff(attempt))
                    continue
                raise _transport_error(exc, self.settings) from exc
            if response.is_success:
                return response
            await response.aread()
            await response.aclose()
            if response.status_code in RETRY_STATUSES and _should_retry(
                call, attempt, self.settings
            ):
                attempt += 1
                await asyncio.sleep(_pause(response, attempt))
                continue
            raise error_from_response(response, self.settings)

    async def paginate(self, page_call: Callable[[str | None], Call[Page[T]]]) -> AsyncIterator[T]:
        """Yield every item of a list, fetching the next page only when it is reached."""
        cursor: str | None = None
        while True:
            page = await self.call(page_call(cursor))
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def aclose(self) -> None:
        """Close the HTTP client if this object made it."""
        if self._owns_client:
            await self._client.aclose()
