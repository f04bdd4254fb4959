"""Fixtures for the REST client: clients of a live collector whose runs go to the stubs.

Every client here talks real HTTP to a collector on a socket; ``requests_seen`` counts what
actually went over the wire (an httpx event hook on the client's own ``http_client``).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

import promptrail
from tests.keys import DEFAULT_KEY


class RequestLog:
    """The requests a client sent, as ``METHOD /path`` strings."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, request: httpx.Request) -> None:
        self.sent.append(f"{request.method} {request.url.path}")

    async def async_hook(self, request: httpx.Request) -> None:
        self(request)

    def count(self, fragment: str = "") -> int:
        """Return how many requests were sent whose line contains ``fragment``."""
        return sum(fragment in line for line in self.sent)


@pytest.fixture
def memory_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK in its memory-only mode (``PROMPTRAIL_DISK_CACHE=0``): what waits for the
    collector stays in the process. A module that pins the mode names it in ``pytestmark``."""
    monkeypatch.setenv("PROMPTRAIL_DISK_CACHE", "0")


@pytest.fixture
def requests_seen() -> RequestLog:
    """The requests the ``client`` / ``aclient`` fixtures sent."""
    return RequestLog()


@pytest.fixture
def client(runs_url: str, requests_seen: RequestLog) -> Iterator[promptrail.Client]:
    """A client of the live collector, authenticated as project default."""
    http = httpx.Client(event_hooks={"request": [requests_seen]})
    with http, promptrail.Client(DEFAULT_KEY, runs_url, http_client=http) as sdk:
        yield sdk


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio."""
    return "asyncio"


@pytest.fixture
async def aclient(
    runs_url: str, requests_seen: RequestLog
) -> AsyncIterator[promptrail.AsyncClient]:
    """An async client of the live collector, authenticated as project default."""
    http = httpx.AsyncClient(event_hooks={"request": [requests_seen.async_hook]})
    async with http, promptrail.AsyncClient(DEFAULT_KEY, runs_url, http_client=http) as sdk:
        yield sdk


@pytest.fixture
def closed_url() -> str:
    """The URL of a port nothing listens on (a collector that is down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def greet(sdk: promptrail.Client, name: str = "greet", **fields: Any) -> promptrail.Prompt:
    """Create the prompt most tests use: one variable, an OpenAI model."""
    fields.setdefault("template", "Say hello to {name}.")
    fields.setdefault("model", "gpt-4o-mini")
    return sdk.prompts.create(name, **fields)
