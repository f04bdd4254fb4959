"""Serve an ASGI app on a real socket (uvicorn in a thread) for the duration of a block."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol, TypeVar

import uvicorn
from starlette.applications import Starlette

from ._anthropic import AnthropicStub
from ._openai import OpenAIStub

# How often a stopping server looks whether its connections and tasks are done: uvicorn's own
# shutdown looks every 0.1 s (and waits 0.1 s first), which was most of a test's teardown.
_DRAIN_POLL = 0.005
# uvicorn's tick: the Date header is refreshed every tenth one.
_TICK = 0.1


class _Server(uvicorn.Server):
    """uvicorn's server, stopped as soon as :meth:`stop` is called.

    uvicorn notices ``should_exit`` on its next 0.1 s tick, then waits 0.1 s and checks its
    connections every 0.1 s: ~0.15-0.2 s of idle time for each server a test starts. This one
    is woken at once, and drains with the same guarantees (it stops accepting, lets every
    request in flight be answered within ``timeout_graceful_shutdown``, waits for its listening
    sockets to close, then runs the app's lifespan shutdown) looking every few milliseconds.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def stop(self) -> None:
        """Ask the server to stop (from any thread); it shuts down at once."""
        self.should_exit = True
        woken = self._woken
        if woken is not None:
            loop, event = woken
            with contextlib.suppress(RuntimeError):  # the loop is closed: it stopped already
                loop.call_soon_threadsafe(event.set)

    async def main_loop(self) -> None:
        """uvicorn's loop of ticks, each one cut short by :meth:`stop`."""
        event = asyncio.Event()
        self._woken = (asyncio.get_running_loop(), event)
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), _TICK)
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown, with its waits cut to what the connections and tasks need."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        # An idle connection closes now; one in the middle of a request closes once answered.
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), timeout=self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        state = self.server_state
        while (state.connections or state.tasks) and not self.force_exit:
            await asyncio.sleep(_DRAIN_POLL)
        for server in self.servers:
            await server.wait_closed()


@contextmanager
def serve(
    app: Any, lifespan: Literal["auto", "on", "off"] = "auto", port: int = 0
) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 at ``port`` (0: a free one); yield its base URL; stop it on exit.

    It returns once the server answers (no sleep to guess at)::

        with serve(app) as url:
            httpx.get(f"{url}/health")
    """
    server = _Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan=lifespan,
            # A stub may still be sleeping in a slow answer nobody waits for any more.
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("server failed to start")
        threading.Event().wait(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.stop()
        thread.join(timeout=15)


def free_port() -> int:
    """Return a TCP port nobody listens on right now (for a server started later on it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def both(openai: OpenAIStub, anthropic: AnthropicStub) -> Starlette:
    """Return one app serving both stubs (their paths do not overlap)."""
    return Starlette(routes=[*openai.app.routes, *anthropic.app.routes])


class _Stub(Protocol):
    app: Any
    url: str


StubT = TypeVar("StubT", bound=_Stub)


@contextmanager
def serve_stub(stub: StubT) -> Iterator[StubT]:
    """Serve a provider stub (no lifespan) with :func:`serve`, its ``url`` set; yield it.

    ::

        with serve_stub(OpenAIStub()) as stub:
            client = openai.OpenAI(base_url=f"{stub.url}/v1", api_key="sk-test")
    """
    with serve(stub.app, lifespan="off") as url:
        stub.url = url
        yield stub
