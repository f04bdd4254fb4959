"""Serve an ASGI app on a real socket (uvicorn in a thread) for the duration of a block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn


@contextmanager
def serve(app: Any, lifespan: Literal["auto", "on", "off"] = "auto") -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 at a free port; yield its base URL; stop it on exit."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
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
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
