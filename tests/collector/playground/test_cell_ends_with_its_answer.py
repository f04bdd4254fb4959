"""A cell's ``end`` (and a streamed run's) goes out as soon as its answer is complete: it does
not wait for the provider to end its body, which the collector then reads to its end so that
the connection goes back to the pool."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.types import Message, Receive, Scope, Send

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.collector.playground.steps import PATH
from tests.keys import DEFAULT_AUTH, OPENAI_KEY

# Shorter than the collector's wait for a body's end after the last event (one second): a
# collector that waited for the body would get it, and send its end only after.
HOLD_SECONDS = 0.9


class HoldingApp:
    """An OpenAI stub that holds its answer's body open after the last event (``[DONE]``)
    until released, or for :data:`HOLD_SECONDS`."""

    def __init__(self, stub: OpenAIStub) -> None:
        self.stub = stub
        self.released = threading.Event()
        self.bodies_ended = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.stub.app(scope, receive, send)
            return

        async def holding(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                loop = asyncio.get_running_loop()
                deadline = loop.time() + HOLD_SECONDS
                while not self.released.is_set() and loop.time() < deadline:
                    await asyncio.sleep(0.005)
                await send(message)
                self.bodies_ended += 1
                return
            await send(message)

        await self.stub.app(scope, receive, holding)


@pytest.fixture
def holding() -> Iterator[HoldingApp]:
    stub = OpenAIStub()
    app = HoldingApp(stub)
    with serve(app, lifespan="off") as url:
        stub.url = url
        yield app


@pytest.fixture
def collector_url(settings: Settings, holding: HoldingApp) -> Iterator[str]:
    """A live collector whose OpenAI calls go to the holding stub."""
    held = settings.model_copy(
        update={
            "openai_base_url": f"{holding.stub.url}/v1",
            "openai_api_key": SecretStr(OPENAI_KEY),
        }
    )
    with serve(create_app(held)) as url:
        yield url


def _ends_while_held(
    url: str, path: str, body: dict[str, Any], holding: HoldingApp
) -> tuple[list[dict[str, Any]], bool]:
    """Stream a run; its events, and whether its end came while the provider's body was
    still open."""
    events: list[dict[str, Any]] = []
    held_at_end = False
    with httpx.stream(
        "POST", f"{url}{path}", json={**body, "stream": True}, headers=DEFAULT_AUTH, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            events.append(event)
            if event["type"] == "end":
                held_at_end = holding.bodies_ended == 0
                holding.released.set()
    return events, held_at_end


def test_a_cell_ends_before_its_provider_ends_the_body(
    collector_url: str, holding: HoldingApp
) -> None:
    body = {"prompt": {"template": "Say hello.", "model": "gpt-4o-mini"}}
    events, held_at_end = _ends_while_held(collector_url, PATH, body, holding)
    end = next(e for e in events if e["type"] == "end")
    assert end["status"] == "success" and end["output"]
    assert held_at_end, "the cell's end waited for the provider's body to end"
    assert events[-1]["type"] == "done"
    # The body was read to its end after the cell ended (its connection back to the pool).
    assert holding.bodies_ended == 1


def test_a_streamed_prompt_run_ends_before_its_provider_ends_the_body(
    collector_url: str, holding: HoldingApp
) -> None:
    created = httpx.post(
        f"{collector_url}/v1/prompts",
        json={"name": "greet", "template": "Say hello.", "model": "gpt-4o-mini"},
        headers=DEFAULT_AUTH,
    )
    assert created.status_code == 201, created.text
    events, held_at_end = _ends_while_held(
        collector_url, "/v1/prompts/greet/run", {"variables": {}}, holding
    )
    assert [e["type"] for e in events][-1] == "end"
    assert "".join(e["content"] for e in events if e["type"] == "chunk")
    assert held_at_end, "the run's end waited for the provider's body to end"
