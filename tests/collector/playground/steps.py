"""Steps for playground runs: run one, read its records, count a stub's requests in flight."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from promptrail.testing import OpenAIStub

PATH = "/v1/playground/runs"
# How long a request waits at the counting stub for others to join it (it never needs to
# wait this long when the service sends as many as it may at once).
GATHER_SECONDS = 5.0


def play(api: TestClient, **body: Any) -> dict[str, Any]:
    """Run a playground run whole; its data."""
    response = api.post(PATH, json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def record(api: TestClient, request_id: str) -> dict[str, Any]:
    """A record's detail."""
    response = api.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def prompt_versions(api: TestClient, name: str) -> list[int]:
    """The version numbers a prompt has."""
    response = api.get(f"/v1/prompts/{name}/versions")
    assert response.status_code == 200, response.text
    return [v["version"] for v in response.json()["data"]]


class CountingApp:
    """An ASGI wrapper of a stub that counts the requests it serves at once. Each request
    waits (at most :data:`GATHER_SECONDS`) until ``gather`` are in flight, so that the most
    the service sends at once is reached whatever the machine's load."""

    def __init__(self, stub: OpenAIStub, gather: int = 8) -> None:
        self.stub = stub
        self.gather = gather
        self.in_flight = 0
        self.most = 0
        self.served = 0
        self._changed: asyncio.Condition | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.stub.app(scope, receive, send)
            return
        if self._changed is None:
            self._changed = asyncio.Condition()
        changed = self._changed
        async with changed:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            changed.notify_all()
        left = False

        async def leave() -> None:
            nonlocal left
            if not left:
                left = True
                async with changed:
                    self.in_flight -= 1
                    self.served += 1

        async def answering(message: Message) -> None:
            # A request is out of flight once its answer's last byte is sent: the service
            # may call again as soon as it has read it, before this handler returns.
            if message["type"] == "http.response.body" and not message.get("more_body"):
                await leave()
            await send(message)

        try:
            async with changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        changed.wait_for(lambda: self.in_flight >= self.gather), GATHER_SECONDS
                    )
            await self.stub.app(scope, receive, answering)
        finally:
            await leave()
