"""Steps the access tests share: the routes an app serves, as the access table names them; the
signed-in browsers of conftest.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Mount

from promptrail.collector.access.principal import Role

PASSWORD = "correct horse battery"
PROMPT = {"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"}

# conftest.py's ``sign_in``: a browser signed in with a role in project default, and the CSRF
# header its writes send.
SignIn = Callable[[Role], tuple[TestClient, dict[str, str]]]


def app_routes(app: FastAPI) -> Iterator[tuple[str, str, object]]:
    """(method, path as served, the route) of every route the app serves; a mount as ``*``."""
    for context in iter_route_contexts(app.routes):
        path = context.path
        assert path is not None
        if isinstance(context.original_route, Mount):
            yield "*", path, context.original_route
            continue
        for method in sorted(context.methods or ()):
            if method != "HEAD":
                yield method, path, context.original_route
