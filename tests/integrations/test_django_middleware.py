"""Web middleware under Django itself: its WSGI and ASGI applications on real sockets.

Django is configured in-process (``settings.configure``), its URLconf is this module, and
the views call the real openai SDK against the wire stub, as the FastAPI and Flask tests do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import django
import httpx
import openai
import pytest
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.urls import include, path

from promptrail.integrations.middleware import (
    ASGIContextMiddleware,
    WSGIContextMiddleware,
    django_route,
)
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

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="promptrail-tests",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[],
        MIDDLEWARE=[],
        DATABASES={},
        USE_TZ=True,
    )
    django.setup()

# What the views use, set per test by the ``django_app`` fixture.
_api: dict[str, Any] = {}


def ask(request: HttpRequest, topic: str) -> JsonResponse:
    _api["client"].chat.completions.create(model="gpt-4o", messages=ask_message(topic))
    return JsonResponse({"ok": topic})


async def ask_async(request: HttpRequest, topic: str) -> JsonResponse:
    async with openai.AsyncOpenAI(api_key="k", base_url=_api["url"], max_retries=0) as client:
        await client.chat.completions.create(model="gpt-4o", messages=ask_message(topic))
    return JsonResponse({"ok": topic})


def item(request: HttpRequest, item_id: int) -> JsonResponse:
    _api["client"].chat.completions.create(model="gpt-4o", messages=ask_message(f"item {item_id}"))
    return JsonResponse({"ok": item_id})


def events(request: HttpRequest) -> StreamingHttpResponse:
    def stream() -> Iterator[str]:
        yield "data: first\n\n"
        released = _api["release"].wait(RELEASE_WAIT)
        # Runs after the view returned, while the server sends the body.
        _api["client"].chat.completions.create(model="gpt-4o", messages=ask_message("stream"))
        yield "data: second\n\n" if released else "data: timed out\n\n"

    return StreamingHttpResponse(stream(), content_type="text/event-stream")


urlpatterns = [
    path("ask/<str:topic>", ask),
    path("ask-async/<str:topic>", ask_async),
    path("events", events),
    path("api/", include([path("items/<int:item_id>", item)])),
]


@pytest.fixture
def django_app(openai_stub: OpenAIStub) -> Iterator[Callable[[str], str]]:
    """Serve Django's WSGI or ASGI application under the middleware; yields its base URL."""
    api_url = f"{openai_stub.url}/v1"
    client = openai.OpenAI(api_key="k", base_url=api_url, max_retries=0)
    release = threading.Event()
    _api.update(client=client, url=api_url, release=release)
    opened: list[Any] = []

    def start(kind: str) -> str:
        if kind == "wsgi":
            server = serve_wsgi(WSGIContextMiddleware(WSGIHandler()))
        else:  # Django answers no lifespan scope
            server = serve(ASGIContextMiddleware(ASGIHandler()), lifespan="off")
        opened.append(server)
        return server.__enter__()

    yield start
    release.set()
    for server in opened:
        server.__exit__(None, None, None)
    client.close()
    _api.clear()


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_concurrent_users_each_see_their_own_context_and_the_django_route(
    kind: str, django_app: Callable[[str], str], openai_stub: OpenAIStub, records: Records
) -> None:
    base_url = django_app(kind)
    openai_stub.script.first_byte_delay = 0.05  # requests overlap in the app
    paths = ("ask", "ask-async") if kind == "asgi" else ("ask", "ask")

    call_as_users(base_url, paths)

    recorded = records(expected=2 * USERS)
    assert len(recorded) == 2 * USERS
    for record in recorded:
        i, n = record["input"][0]["content"].removeprefix("about topic-").split("-")
        assert record["metadata"] == {
            "user_id": f"user-{i}",
            "session_id": f"session-{i}",
            "request_id": f"req-{i}-{n}",
            "route": f"/{paths[int(n)]}/<str:topic>",
        }


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_an_included_routes_template_is_the_joined_patterns(
    kind: str, django_app: Callable[[str], str], records: Records
) -> None:
    base_url = django_app(kind)

    response = httpx.get(f"{base_url}/api/items/42", headers={"X-User-Id": "u-item"})
    assert response.json() == {"ok": 42}
    assert httpx.get(f"{base_url}/nowhere", headers={"X-User-Id": "u-404"}).status_code == 404

    (record,) = records()
    assert record["input"] == ask_message("item 42")
    assert record["metadata"]["route"] == "/api/items/<int:item_id>"
    assert record["metadata"]["user_id"] == "u-item"


def test_a_streamed_django_response_is_produced_inside_the_context(
    django_app: Callable[[str], str], records: Records
) -> None:
    base_url = django_app("wsgi")

    read_events(base_url, _api["release"])

    (record,) = records()
    assert record["metadata"]["user_id"] == "u-sse"
    assert record["metadata"]["route"] == "/events"


def test_the_route_reader_answers_only_for_django_and_none_for_unknown_paths() -> None:
    route = django_route(WSGIHandler())
    assert route is not None
    assert route({"PATH_INFO": "/ask/x"}) == "/ask/<str:topic>"
    assert route({"PATH_INFO": "/nowhere"}) is None
    # An ASGI scope: its path below the root path, as Django takes it.
    assert route({"path": "/app/api/items/7", "root_path": "/app"}) == "/api/items/<int:item_id>"
    assert django_route(object()) is None
