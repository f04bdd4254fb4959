"""Shared fixtures: one embedded ClickHouse per test session, a fresh database per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from tests.stubs.anthropic_stub import AnthropicStub
from tests.stubs.openai_stub import OpenAIStub
from tests.stubs.server import serve


@pytest.fixture(scope="session")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's embedded store (chDB allows one data path per process)."""
    path: Path = tmp_path_factory.mktemp("chdb")
    return f"chdb://{path}"


@pytest.fixture
def settings(store_url: str, tmp_path: Path) -> Iterator[Settings]:
    """Settings for a collector on its own fresh database (dropped after the test)."""
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=tmp_path,
        init_api_key="pr-test-default-key",
    )
    yield settings
    # Every database left behind would slow the session's shared engine down test by test.
    client = open_client(store_url)
    try:
        client.command(f"DROP DATABASE IF EXISTS `{settings.database}` SYNC")
    finally:
        client.close()


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """A collector app over real HTTP semantics (ASGI), authenticated as project default."""
    app = create_app(settings)
    with TestClient(app, headers={"Authorization": "Bearer pr-test-default-key"}) as client:
        yield client


@pytest.fixture
def live_url(settings: Settings) -> Iterator[str]:
    """A collector on a real socket (uvicorn in a thread), for concurrency over HTTP."""
    import threading

    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("collector failed to start")
        threading.Event().wait(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def openai_server() -> Iterator[OpenAIStub]:
    """One OpenAI wire-format stub on a real socket for the session (reset per test)."""
    stub = OpenAIStub()
    with serve(stub.app, lifespan="off") as url:
        stub.url = url
        yield stub


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[AnthropicStub]:
    """One Anthropic wire-format stub on a real socket for the session (reset per test)."""
    stub = AnthropicStub()
    with serve(stub.app, lifespan="off") as url:
        stub.url = url
        yield stub


@pytest.fixture
def openai_stub(openai_server: OpenAIStub) -> OpenAIStub:
    """The OpenAI stub with a fresh script and call log."""
    openai_server.reset()
    return openai_server


@pytest.fixture
def anthropic_stub(anthropic_server: AnthropicStub) -> AnthropicStub:
    """The Anthropic stub with a fresh script and call log."""
    anthropic_server.reset()
    return anthropic_server
