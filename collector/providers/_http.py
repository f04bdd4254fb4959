"""The HTTP mechanics both providers share: pooled client, retries, SSE parsing, errors.

httpx is used directly rather than the providers' SDKs: the collector relays bytes, so it
needs exact control of when a call is retried (only before the first byte), of its timeouts,
and of cancellation (a client that goes away closes the upstream connection at once).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from promptrail._retry import RetryPolicy, retry_after

from . import HttpPolicy, ProviderEndpoint, ProviderFailure
from ._pool import transport

# Errors that mean the request never reached the provider or got no answer at all: safe to
# retry. Read, write and pool timeouts are not in the list (see HttpPolicy).
_RETRYABLE_TRANSPORT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
)
_MAX_ERROR_CHARS = 2000

# httpx logs every request at INFO ("HTTP Request: POST ... 200 OK"), and the collector logs
# at INFO: a formatted line and a write to the log per provider call, on the event loop, that
# says less than the run's own record. Its warnings still show; a level set on the "httpx"
# logger by whoever runs the collector stands.
_HTTPX_LOG = logging.getLogger("httpx")
if _HTTPX_LOG.level == logging.NOTSET:
    _HTTPX_LOG.setLevel(logging.WARNING)
_MAX_ERROR_BYTES = 64 * 1024


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle is slow next to a request; every provider client of the process
    # shares one.
    return httpx.create_ssl_context()


def new_client(
    endpoint: ProviderEndpoint, headers: Mapping[str, str], policy: HttpPolicy
) -> httpx.AsyncClient:
    """Return a pooled client for one provider endpoint."""
    limits = httpx.Limits(
        max_connections=policy.max_connections,
        max_keepalive_connections=min(policy.max_connections, 100),
    )
    return httpx.AsyncClient(
        base_url=endpoint.base_url,
        verify=_tls_context(),
        # The provider's own authentication headers win over a connection's.
        headers={**dict(endpoint.headers), **headers},
        timeout=httpx.Timeout(
            connect=policy.connect_timeout,
            read=policy.read_timeout,
            write=policy.read_timeout,
            pool=policy.read_timeout,
        ),
        limits=limits,
        # Direct calls go through this pool; a proxy of the environment keeps httpx's own.
        transport=transport(_tls_context(), limits),
        # Redirects of an API POST are a misconfiguration; following them would resend it.
        follow_redirects=False,
    )


@asynccontextmanager
async def open_response(
    client: httpx.AsyncClient,
    provider: str,
    path: str,
    body: dict[str, Any],
    policy: HttpPolicy,
) -> AsyncIterator[httpx.Response]:
    """POST ``body`` and yield the successful, still unread response; close it on exit.

    Retries connection errors, 429 and 5xx with backoff, before any byte of a successful
    answer; any other status, or the last failure, raises ProviderFailure.
    """
    response = await _send_with_retries(client, provider, path, body, policy)
    try:
        yield response
    finally:
        await response.aclose()


async def _send_with_retries(
    client: httpx.AsyncClient,
    provider: str,
    path: str,
    body: dict[str, Any],
    policy: HttpPolicy,
) -> httpx.Response:
    attempt = 0
    while True:
        try:
            response = await _send(client, _request(client, path, body))
        except _RETRYABLE_TRANSPORT as exc:
            if attempt >= policy.max_retries:
                message = f"cannot reach the provider: {_describe(exc)}"
                raise ProviderFailure(provider, message) from exc
            delay = _backoff(policy, attempt)
        except httpx.TimeoutException as exc:
            raise ProviderFailure(provider, f"timed out: {_describe(exc)}") from exc
        except httpx.HTTPError as exc:
            raise ProviderFailure(provider, f"request failed: {_describe(exc)}") from exc
        else:
            if response.is_success:
                return response
            failure = await _failure_of(provider, response)
            if not _retryable_status(response.status_code) or attempt >= policy.max_retries:
                raise failure
            delay = retry_after(response) or _backoff(policy, attempt)
            delay = min(delay, policy.retry_max_delay)
        await anyio.sleep(delay)
        attempt += 1


def _request(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Request:
    """The POST of ``body`` to ``path`` under the client's base URL, with its headers and
    timeouts: ``client.build_request``'s request, without parsing the URL on every call."""
    return httpx.Request(
        "POST",
        _url(client.base_url, path),
        headers=client.headers,
        json=body,
        extensions={"timeout": client.timeout.as_dict()},
    )


@functools.lru_cache(maxsize=1024)
def _url(base: httpx.URL, path: str) -> httpx.URL:
    # As httpx joins them: the base URL ends in "/", the path's leading "/" is dropped.
    return base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode())


async def _send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send ``request`` through the client's transport for its URL (the environment's proxy,
    if any), the answer's body unread.

    ``client.send`` adds layers a provider call never uses, on every call: auth flows,
    redirects (never followed here), event hooks, and a cookie jar, which would carry the
    cookies a provider set on one project's call into another project's calls.
    """
    through = client._transport_for_url(request.url)
    response = await through.handle_async_request(request)
    response.request = request
    if _HTTPX_LOG.isEnabledFor(logging.INFO):  # the line client.send logs, when asked for
        _HTTPX_LOG.info(
            'HTTP Request: %s %s "%s %d %s"',
            request.method,
            request.url,
            response.http_version,
            response.status_code,
            response.reason_phrase,
        )
    return response


def _retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


def _backoff(policy: HttpPolicy, attempt: int) -> float:
    """The pause after failed attempt ``attempt`` (0-based): promptrail's one retry rule."""
    rule = RetryPolicy(policy.retry_base_delay, policy.retry_max_delay, policy.retry_max_delay)
    return rule.backoff(attempt + 1)


async def _failure_of(provider: str, response: httpx.Response) -> ProviderFailure:
    """Read an error answer (bounded) and turn it into a ProviderFailure."""
    raw = b""
    try:
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) >= _MAX_ERROR_BYTES:
                break
    except httpx.HTTPError:
        pass
    finally:
        await response.aclose()
    detail = error_message(raw[:_MAX_ERROR_BYTES])
    text = f"HTTP {response.status_code}" + (f": {detail}" if detail else "")
    return ProviderFailure(provider, text, status=response.status_code)


def error_message(raw: bytes | str) -> str:
    """Return the message of an error body (``{"error": {"message"}}`` in both formats)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip()[:_MAX_ERROR_CHARS]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:_MAX_ERROR_CHARS]
    if isinstance(error, str):
        return error[:_MAX_ERROR_CHARS]
    return text.strip()[:_MAX_ERROR_CHARS]


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def read_json(provider: str, response: httpx.Response) -> dict[str, Any]:
    """Read a whole JSON object body, or raise ProviderFailure."""
    try:
        raw = await response.aread()
    except httpx.TimeoutException as exc:
        raise ProviderFailure(provider, f"timed out reading the answer: {_describe(exc)}") from exc
    except httpx.HTTPError as exc:
        raise ProviderFailure(provider, f"answer broke off: {_describe(exc)}") from exc
    try:
        payload = json.loads(raw)
    except ValueError:
        raise ProviderFailure(provider, "answer is not JSON") from None
    if not isinstance(payload, dict):
        raise ProviderFailure(provider, "answer is not a JSON object")
    return payload


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (if any) and its joined ``data:`` lines."""

    event: str | None
    data: str


# How long a stream's body is read on after its last event: the rest is normally an empty end
# of the chunked body, already on its way.
_DRAIN_SECONDS = 1.0


async def finish_reading(events: AsyncIterator[list[SseEvent]]) -> None:
    """Read a stream's body to its end after its last event (``[DONE]``, ``message_stop``).

    A response closed with its body unread closes its connection instead of handing it back
    to the pool, so every streamed call would open a new connection (a TLS handshake with a
    real provider); a server that keeps the body open past the last event is given up after
    ``_DRAIN_SECONDS`` and its connection closed as before. The answer is complete by then
    (the stream has yielded its end), so a body that breaks off here loses nothing: only
    its connection, which is not handed back.
    """
    with anyio.move_on_after(_DRAIN_SECONDS), contextlib.suppress(ProviderFailure):
        async for _ in events:
            pass


async def sse_events(
    provider: str, response: httpx.Response
) -> AsyncGenerator[list[SseEvent], None]:
    """Parse a text/event-stream body as it arrives: each item is the events one read of the
    body completed (never empty); transport failures are ProviderFailure.

    By the read rather than by the event: a provider's events mostly arrive several to a read
    (all at once when the answer was ready before its first byte), and a caller hands a read's
    text on as one piece, so each layer above runs once a read instead of once an event.
    Lines end with LF, CRLF or CR, as SSE allows; a line is decoded whole (SSE is UTF-8), so a
    character split between two reads is never cut.
    """
    event: str | None = None
    data: list[str] = []
    pending = b""
    try:
        async for piece in response.aiter_bytes():
            lines = (pending + piece if pending else piece).splitlines(keepends=True)
            last = lines[-1] if lines else b""
            # A last line without its end waits for the next read; so does one ending in CR,
            # which may be the first half of a CRLF.
            pending = b"" if last.endswith(b"\n") else lines.pop() if lines else b""
            batch: list[SseEvent] = []
            for raw in lines:
                event, data = _take_line(raw, event, data, batch)
            if batch:
                yield batch
    except httpx.TimeoutException as exc:
        raise ProviderFailure(provider, f"stream stalled: {_describe(exc)}") from exc
    except httpx.HTTPError as exc:
        raise ProviderFailure(provider, f"stream broke off: {_describe(exc)}") from exc
    batch = []
    if pending:
        event, data = _take_line(pending, event, data, batch)
    if data:
        batch.append(SseEvent(event, "\n".join(data)))
    if batch:
        yield batch


def _take_line(
    raw: bytes, event: str | None, data: list[str], batch: list[SseEvent]
) -> tuple[str | None, list[str]]:
    """Take one line of the body: an empty line ends an event (added to ``batch``); returns
    the event being read, its name and data lines so far."""
    line = raw.rstrip(b"\r\n").decode("utf-8", "replace")
    if not line:
        if data:
            batch.append(SseEvent(event, "\n".join(data)))
        return None, []
    name, _, value = line.partition(":")
    value = value.removeprefix(" ")
    if name == "data":
        data.append(value)
    elif name == "event":
        event = value
    # Comments (":"), "id" and "retry" carry nothing a run needs.
    return event, data


def parse_json_data(provider: str, event: SseEvent) -> dict[str, Any]:
    """Decode an event's data as a JSON object, or raise ProviderFailure."""
    try:
        payload = json.loads(event.data)
    except ValueError:
        raise ProviderFailure(provider, f"stream event is not JSON: {event.data[:200]}") from None
    if not isinstance(payload, dict):
        raise ProviderFailure(provider, "stream event is not a JSON object")
    return payload


def as_int(value: Any) -> int:
    """Return a token count from a provider payload (absent or malformed: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
