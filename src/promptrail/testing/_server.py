"""Serve an ASGI app on a real socket (uvicorn in a thread) for the duration of a block."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol, TypeVar

import uvicorn
from starlette.applications import Starlette

from ._anthropic import AnthropicStub
from ._openai import OpenAIStub


@contextmanager
def serve(
    app: Any, lifespan: Literal["auto", "on", "off"] = "auto", port: int = 0
) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 at ``port`` (0: a free one); yield its base URL; stop it on exit.

    It returns once the server answers (no sleep to guess at)::

        with serve(app) as url:
            httpx.get(f"{url}/health")
    """
    server = uvicorn.Server(
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
        server.should_exit = True
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
