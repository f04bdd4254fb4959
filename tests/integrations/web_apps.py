"""Steps the web-middleware tests share: concurrent users calling an app, a stream read while the
test holds it, a WSGI app served on a socket.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
from werkzeug.serving import make_server

USERS = 10


RELEASE_WAIT = 10.0  # how long a stream waits for the test before giving up


def ask_message(topic: str) -> list[dict[str, str]]:
    """The chat messages a route sends for ``topic``."""
    return [{"role": "user", "content": f"about {topic}"}]


@contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    """Serve a WSGI app on a free local port for the block; its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=15)


def call_as_users(base_url: str, paths: tuple[str, ...]) -> None:
    """USERS users at once, user i calling ``/{paths[n]}/topic-i-n`` with its own ids."""

    def user(i: int) -> None:
        with httpx.Client(base_url=base_url) as client:
            for n, path in enumerate(paths):
                headers = {
                    "X-User-Id": f"user-{i}",
                    "X-Session-Id": f"session-{i}",
                    "X-Request-Id": f"req-{i}-{n}",
                }
                response = client.get(f"/{path}/topic-{i}-{n}", headers=headers)
                assert response.status_code == 200
                assert response.json() == {"ok": f"topic-{i}-{n}"}

    with ThreadPoolExecutor(USERS) as pool:
        list(pool.map(user, range(USERS)))


def read_events(base_url: str, release: threading.Event) -> None:
    """Read ``/events`` as user ``u-sse``: its second event only once the first arrived."""
    with (
        httpx.Client(base_url=base_url) as client,
        client.stream("GET", "/events", headers={"X-User-Id": "u-sse"}) as response,
    ):
        chunks = response.iter_text()
        # The stream holds back its second event until the first has reached the client.
        assert next(chunks) == "data: first\n\n"
        release.set()
        assert "".join(chunks) == "data: second\n\n"
        assert response.headers["content-type"].startswith("text/event-stream")
