"""Web middleware: FastAPI and Flask apps on real sockets, called by concurrent users."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import flask
import httpx
import openai
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from promptrail.integrations.middleware import ASGIContextMiddleware, WSGIContextMiddleware
from promptrail.testing import OpenAIStub, serve
from tests.capture import Records
from tests.integrations.web_apps import (
    RELEASE_WAIT,
    USERS,
    ask_message,
    call_as_users,
    read_events,
    serve_wsgi,
)


def fastapi_app(api_url: str, release: threading.Event, **options: Any) -> FastAPI:
    clients: dict[str, openai.AsyncOpenAI] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        clients["api"] = openai.AsyncOpenAI(api_key="k", base_url=api_url, max_retries=0)
        yield
        await clients["api"].close()

    app = FastAPI(lifespan=lifespan)
    app.add_middleware(ASGIContextMiddleware, **options)
    sync_api = openai.OpenAI(api_key="k", base_url=api_url, max_retries=0)

    @app.get("/ask/{topic}")
    async def ask(topic: str) -> dict[str, str]:
        await clients["api"].chat.completions.create(model="gpt-4o", messages=ask_message(topic))
        return {"ok": topic}

    @app.get("/ask-sync/{topic}")
    def ask_sync(topic: str) -> dict[str, str]:  # FastAPI runs it in its thread pool
        sync_api.chat.completions.create(model="gpt-4o", messages=ask_message(topic))
        return {"ok": topic}

    @app.get("/events")
    async def events() -> StreamingResponse:
        async def stream() -> AsyncIterator[str]:
            yield "data: first\n\n"
            released = await asyncio.to_thread(release.wait, RELEASE_WAIT)
            await clients["api"].chat.completions.create(
                model="gpt-4o", messages=ask_message("stream")
            )
            yield "data: second\n\n" if released else "data: timed out\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return app


def flask_app(api_url: str, release: threading.Event, **options: Any) -> flask.Flask:
    app = flask.Flask(__name__)
    api = openai.OpenAI(api_key="k", base_url=api_url, max_retries=0)

    @app.get("/ask/<topic>")
    @app.get("/ask-sync/<topic>")
    def ask(topic: str) -> dict[str, str]:
        api.chat.completions.create(model="gpt-4o", messages=ask_message(topic))
        return {"ok": topic}

    @app.get("/events")
    def events() -> flask.Response:
        def stream() -> Iterator[str]:
            yield "data: first\n\n"
            released = release.wait(RELEASE_WAIT)
            # Runs after the view returned, while the server sends the body.
            api.chat.completions.create(model="gpt-4o", messages=ask_message("stream"))
            yield "data: second\n\n" if released else "data: timed out\n\n"

        return flask.Response(stream(), mimetype="text/event-stream")

    app.wsgi_app = WSGIContextMiddleware(app.wsgi_app, **options)  # type: ignore[method-assign]
    return app


ROUTES = {"fastapi": "/ask/{topic}", "flask": "/ask/<topic>"}


@pytest.fixture
def run_app(openai_stub: OpenAIStub) -> Iterator[Callable[..., Any]]:
    """Start the named app under its middleware; yields (base URL, release event) per call."""
    release = threading.Event()
    opened: list[Any] = []

    def start(kind: str, **options: Any) -> tuple[str, threading.Event]:
        api_url = f"{openai_stub.url}/v1"
        if kind == "fastapi":
            server = serve(fastapi_app(api_url, release, **options), lifespan="on")
        else:
            server = serve_wsgi(flask_app(api_url, release, **options))
        opened.append(server)
        return server.__enter__(), release

    yield start
    release.set()
    for server in opened:
        server.__exit__(None, None, None)


@pytest.mark.parametrize("kind", ["fastapi", "flask"])
def test_ten_concurrent_users_each_see_only_their_own_id_on_their_records(
    kind: str, run_app: Callable[..., Any], openai_stub: OpenAIStub, records: Records
) -> None:
    base_url, _ = run_app(kind)
    openai_stub.script.first_byte_delay = 0.05  # requests overlap in the app

    call_as_users(base_url, ("ask", "ask-sync"))

    recorded = records(expected=2 * USERS)
    assert len(recorded) == 2 * USERS
    for record in recorded:
        i, n = record["input"][0]["content"].removeprefix("about topic-").split("-")
        route = ROUTES[kind] if n == "0" else ROUTES[kind].replace("/ask/", "/ask-sync/")
        assert record["metadata"] == {
            "user_id": f"user-{i}",
            "session_id": f"session-{i}",
            "request_id": f"req-{i}-{n}",
            "route": route,
        }


@pytest.mark.parametrize("kind", ["fastapi", "flask"])
def test_a_streamed_response_passes_through_unbuffered_inside_the_context(
    kind: str, run_app: Callable[..., Any], records: Records
) -> None:
    base_url, release = run_app(kind)

    read_events(base_url, release)

    (record,) = records()
    assert record["metadata"]["user_id"] == "u-sse"
    assert record["metadata"]["route"] == "/events"


@pytest.mark.parametrize("kind", ["fastapi", "flask"])
def test_an_identify_callable_sets_the_user_and_a_failing_one_never_fails_the_request(
    kind: str, run_app: Callable[..., Any], records: Records
) -> None:
    def identify(request: Any) -> dict[str, str]:
        path = request["path"] if kind == "fastapi" else request["PATH_INFO"]
        if "broken" in path:
            raise RuntimeError("identity service down")
        return {"user_id": "from-callable", "tenant": "acme"}

    base_url, _ = run_app(kind, identify=identify, user_header=None)
    with httpx.Client(base_url=base_url) as client:
        assert client.get("/ask/fine", headers={"X-User-Id": "ignored"}).status_code == 200
        assert client.get("/ask/broken").status_code == 200

    calls = {r["input"][0]["content"]: r for r in records(expected=2)}
    fine = calls["about fine"]["metadata"]
    assert (fine["user_id"], fine["tenant"]) == ("from-callable", "acme")
    assert len(fine["request_id"]) == 32  # none was sent: a fresh one
    assert calls["about broken"]["metadata"] == {}


def test_the_route_template_of_a_mounted_starlette_route(
    openai_stub: OpenAIStub, records: Records
) -> None:
    api = openai.OpenAI(api_key="k", base_url=f"{openai_stub.url}/v1", max_retries=0)

    def item(request: Request) -> PlainTextResponse:
        topic = request.path_params["item_id"]
        api.chat.completions.create(model="gpt-4o", messages=ask_message(topic))
        return PlainTextResponse("ok")

    app = Starlette(routes=[Mount("/api", routes=[Route("/items/{item_id}", item)])])
    app.add_middleware(ASGIContextMiddleware)
    with serve(app, lifespan="off") as base_url:
        assert httpx.get(f"{base_url}/api/items/42").status_code == 200
    api.close()

    (record,) = records()
    assert record["metadata"]["route"] == "/api/items/{item_id}"
