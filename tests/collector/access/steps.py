"""Steps the access tests share: the routes an app serves, as the access table names them."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount


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
