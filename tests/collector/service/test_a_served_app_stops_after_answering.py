"""``promptrail.testing.serve`` stops its server at the block's end without dropping anything:
a request in flight is answered in full, the app's lifespan shutdown runs (a collector closes
its store there), and the port is free again when the block has ended."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from promptrail.testing import serve

# A guard against a hang, never a measure of time.
_PATIENCE = 60.0


class SlowApp:
    """An app whose answers take a while, recording its lifespan."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.answering = threading.Event()

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            self.events.append("startup")
            yield
            self.events.append("shutdown")

        self.app = Starlette(
            routes=[Route("/slow", self.slow), Route("/stream", self.stream)], lifespan=lifespan
        )

    async def slow(self, request: Request) -> PlainTextResponse:
        self.answering.set()
        await asyncio.sleep(0.3)
        return PlainTextResponse("done")

    async def stream(self, request: Request) -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for number in range(5):
                self.answering.set()
                await asyncio.sleep(0.05)
                yield f"part {number}\n".encode()

        return StreamingResponse(parts(), media_type="text/plain")


def port_is_free(port: int) -> bool:
    """Whether a server can listen on ``port`` now (as uvicorn and asyncio bind: reusing an
    address whose last connections are only waiting out TCP's TIME_WAIT)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
        return True


def test_a_request_in_flight_at_the_end_of_the_block_is_answered_then_the_server_is_gone() -> None:
    slow = SlowApp()
    with ThreadPoolExecutor(2) as pool:
        with serve(slow.app) as url:
            port = urlsplit(url).port
            answer = pool.submit(httpx.get, f"{url}/slow", timeout=_PATIENCE)
            assert slow.answering.wait(_PATIENCE)
        # The block has ended: the server stopped, its lifespan shut down, its port closed.
        assert slow.events == ["startup", "shutdown"]
        assert port is not None and port_is_free(port)
        response = answer.result(_PATIENCE)

    assert response.status_code == 200 and response.text == "done"


def test_a_stream_in_flight_at_the_end_of_the_block_is_sent_whole() -> None:
    slow = SlowApp()
    with ThreadPoolExecutor(1) as pool:
        with serve(slow.app) as url:
            answer = pool.submit(httpx.get, f"{url}/stream", timeout=_PATIENCE)
            assert slow.answering.wait(_PATIENCE)
        response = answer.result(_PATIENCE)

    assert response.text.splitlines() == [f"part {number}" for number in range(5)]
    assert slow.events == ["startup", "shutdown"]
