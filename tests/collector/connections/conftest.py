"""The provider stand-in of the connection tests (see stubs.py), on a real socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from promptrail.testing import serve
from tests.collector.connections.stubs import WireStub


@pytest.fixture
def wire_stub() -> Iterator[WireStub]:
    """A provider stand-in on a real socket for one test."""
    stub = WireStub()

    async def answer(request: Request) -> JSONResponse:
        stub.requests.append(
            (request.method, request.url.path, dict(request.headers), await request.body())
        )
        return JSONResponse(stub.body, status_code=stub.status)

    app = Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])
    with serve(app) as url:
        stub.url = url
        yield stub
