"""Fixtures for runs: provider stubs on real sockets, and a collector pointed at them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.stubs.anthropic_stub import AnthropicStub
from tests.stubs.openai_stub import OpenAIStub
from tests.stubs.server import serve

OPENAI_KEY = "sk-stub-openai"
ANTHROPIC_KEY = "sk-ant-stub"
# Short enough to keep the timeout test quick, long enough for a loaded 2-core machine.
READ_TIMEOUT = 1.5


@pytest.fixture
def run_settings(
    settings: Settings, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> Settings:
    """Collector settings whose providers are the stubs, with quick timeouts and backoff."""
    return settings.model_copy(
        update={
            "openai_base_url": f"{openai_stub.url}/v1",
            "openai_api_key": SecretStr(OPENAI_KEY),
            "anthropic_base_url": anthropic_stub.url,
            "anthropic_api_key": SecretStr(ANTHROPIC_KEY),
            "provider_read_timeout": READ_TIMEOUT,
            "provider_retry_base_delay": 0.01,
            "provider_retry_max_delay": 0.05,
        }
    )


@pytest.fixture
def runs_api(run_settings: Settings) -> Iterator[TestClient]:
    """A collector (ASGI, in process) whose runs go to the stubs; project default."""
    app = create_app(run_settings)
    with TestClient(app, headers={"Authorization": "Bearer pr-test-default-key"}) as client:
        yield client


@pytest.fixture
def runs_url(run_settings: Settings) -> Iterator[str]:
    """The same collector on a real socket, for streams read as they arrive."""
    with serve(create_app(run_settings)) as url:
        yield url
