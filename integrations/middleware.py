"""Web middleware: each HTTP request's user, session, route and request id on its records.

Starlette / FastAPI (pure ASGI; streaming and SSE responses pass through untouched)::

    from promptrail.integrations.middleware import ASGIContextMiddleware

    app.add_middleware(ASGIContextMiddleware)   # X-User-Id, X-Session-Id, X-Request-Id

Flask (any WSGI app)::

    from promptrail.integrations.middleware import WSGIContextMiddleware

    app.wsgi_app = WSGIContextMiddleware(app.wsgi_app)

Django: wrap ``application`` in ``wsgi.py`` (or ``asgi.py``, with the ASGI middleware)::

    application = WSGIContextMiddleware(get_wsgi_application())

Each request runs inside ``promptrail.context(...)`` with ``user_id`` and ``session_id`` taken
from configurable headers (or returned by ``identify``), ``route`` (the route template, e.g.
``/users/{user_id}``) and ``request_id`` (the request id header, else a fresh one). The
middleware never reads the body and never fails a request: if working out the context
raises, the request runs without one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from promptrail._context import Observation, current, reset_current, set_current, with_metadata

logger = logging.getLogger("promptrail")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

Identify = Callable[[Any], Mapping[str, Any] | None]
"""Given the ASGI scope or the WSGI environ, return metadata (``user_id``, ``session_id``...)."""

RouteOf = Callable[[Any], str | None]
"""Given the ASGI scope or the WSGI environ, return the route template."""


class _RequestFields:
    """What a request contributes to its context; shared by both middlewares."""

    __slots__ = ("environ_keys", "headers", "identify", "route", "scope_names")

    def __init__(
        self,
        user_header: str | None,
        session_header: str | None,
        request_id_header: str | None,
        identify: Identify | None,
        route: RouteOf | None,
    ) -> None:
        # metadata key -> header name (lower case), for the headers that are configured
        self.headers = {
            key: name.lower()
            for key, name in (
                ("user_id", user_header),
                ("session_id", session_header),
                ("request_id", request_id_header),
            )
            if name
        }
        # The header names as ASGI servers give them (lower case, bytes), and as WSGI does.
        self.scope_names = {name.encode("latin-1") for name in self.headers.values()}
        self.environ_keys = {
            name: "HTTP_" + name.upper().replace("-", "_") for name in self.headers.values()
        }
        self.identify = identify
        self.route = route

    def observation(self, request: Any, header_values: Mapping[str, str]) -> Observation | None:
        """The observation a request runs in; None (and a log line) if working it out fails."""
        try:
            metadata: dict[str, Any] = {
                key: header_values[name]
                for key, name in self.headers.items()
                if header_values.get(name)
            }
            metadata.setdefault("request_id", uuid.uuid4().hex)
            route = self.route(request) if self.route is not None else None
            if route:
                metadata["route"] = route
            if self.identify is not None:
                metadata.update(self.identify(request) or {})
            return with_metadata(current(), metadata)
        except Exception:
            logger.warning("promptrail: no context for this request", exc_info=True)
            return None


class _ContextMiddleware:
    """The options both middlewares take; ``route`` defaults to the framework's reader."""

    def __init__(
        self,
        app: Any,
        *,
        user_header: str | None = "x-user-id",
        session_header: str | None = "x-session-id",
        request_id_header: str | None = "x-request-id",
        identify: Identify | None = None,
        route: RouteOf | None = None,
    ) -> None:
        self.app = app
        self._fields = _RequestFields(
            user_header, session_header, request_id_header, identify, route or self._route(app)
        )

    @staticmethod
    def _route(app: Any) -> RouteOf | None:
        """The route-template reader for ``app`` when none is given."""
        raise NotImplementedError


class ASGIContextMiddleware(_ContextMiddleware):
    """Run each HTTP request of an ASGI app inside a promptrail context (see the module)."""

    app: ASGIApp

    @staticmethod
    def _route(app: Any) -> RouteOf | None:
        return django_route(app) or starlette_route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wanted = self._fields.scope_names
        values = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name in wanted
        }
        observation = self._fields.observation(scope, values)
        if observation is None:
            await self.app(scope, receive, send)
            return
        token = set_current(observation)
        try:
            await self.app(scope, receive, send)
        finally:
            reset_current(token)


def starlette_route(scope: Scope) -> str | None:
    """The template of the Starlette / FastAPI route a request goes to, mounts included.

    The middleware runs before the router, so it asks the app's routes the router's own
    question (``route.matches``) rather than waiting for the router's answer.
    """
    router = getattr(scope.get("app"), "router", None)
    return _matching_path(getattr(router, "routes", None) or (), scope, "")


def _matching_path(routes: Iterable[Any], scope: Scope, prefix: str) -> str | None:
    for route in routes:
        match, child_scope = route.matches(scope)
        if not getattr(match, "value", 0):  # Match.NONE
            continue
        path = prefix + getattr(route, "path", "")
        inner = getattr(route, "routes", None)
        if inner:  # a Mount: the template goes on inside it
            found = _matching_path(inner, {**scope, **child_scope}, path)
            if found:
                return found
            continue
        return path
    return None


class WSGIContextMiddleware(_ContextMiddleware):
    """Run each request of a WSGI app inside a promptrail context (see the module).

    The response body is iterated inside the context too, one item at a time, so a streamed
    response's model calls carry it; the body is never buffered.
    """

    app: WSGIApp

    @staticmethod
    def _route(app: Any) -> RouteOf | None:
        return flask_route(app) or django_route(app)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        values = {
            name: environ[key] for name, key in self._fields.environ_keys.items() if key in environ
        }
        observation = self._fields.observation(environ, values)
        if observation is None:
            return self.app(environ, start_response)
        token = set_current(observation)
        try:
            body = self.app(environ, start_response)
        finally:
            reset_current(token)
        file_wrapper = environ.get("wsgi.file_wrapper")
        if isinstance(file_wrapper, type) and isinstance(body, file_wrapper):
            return body  # the server may send a file wrapper with sendfile: leave it be
        return _BodyInContext(body, observation)


class _BodyInContext:
    """A WSGI response body whose items are produced inside the request's context."""

    __slots__ = ("_body", "_items", "_observation")

    def __init__(self, body: Iterable[bytes], observation: Observation) -> None:
        self._body = body
        self._observation = observation
        self._items: Iterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        token = set_current(self._observation)
        try:
            if self._items is None:
                self._items = iter(self._body)
            return next(self._items)
        finally:
            reset_current(token)

    def close(self) -> None:
        close = getattr(self._body, "close", None)
        if close is None:
            return
        token = set_current(self._observation)
        try:
            close()
        finally:
            reset_current(token)


def flask_route(app: Any) -> RouteOf | None:
    """A route-template reader for a Flask app (or its ``wsgi_app``); None for other apps."""
    url_map = getattr(getattr(app, "__self__", app), "url_map", None)
    if url_map is None:
        return None

    def route(environ: Environ) -> str | None:
        try:
            rule, _ = url_map.bind_to_environ(environ).match(return_rule=True)
        except Exception:  # 404, 405, a redirect: no route to name
            return None
        return str(rule.rule)

    return route


def django_route(app: Any) -> RouteOf | None:
    """A route-template reader for Django's WSGI or ASGI application; None for other apps.

    The middleware runs before Django, so it asks Django's URL resolver (``ROOT_URLCONF``)
    the question Django will ask: the template is the matched patterns joined, with a
    leading slash (``/items/<int:item_id>``). A path Django cannot resolve has no template.
    """
    if not type(app).__module__.startswith("django.core.handlers."):
        return None
    # Django ships no type information.
    from django.core.handlers.wsgi import get_path_info  # type: ignore[import-untyped]
    from django.urls import Resolver404, resolve  # type: ignore[import-untyped]

    def route(request: Any) -> str | None:
        if "PATH_INFO" in request:  # a WSGI environ
            path = get_path_info(request)
        else:  # an ASGI scope: its path below the root path, as Django takes it
            path, root = request["path"], request.get("root_path", "")
            path = path.removeprefix(root) if root else path
        try:
            match = resolve(path or "/")
        except Resolver404:
            return None
        return "/" + str(match.route)

    return route
