"""Fixtures for playground runs: a collector whose runs go to the stubs (``runs_api`` of
tests/collector/conftest.py), a client of another project on it, and an OpenAI stub that
counts the requests it holds at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import OpenAIStub, serve
from tests.collector.playground.steps import CountingApp
from tests.keys import DEFAULT_AUTH, OPENAI_KEY


@pytest.fixture
def other_api(runs_api: TestClient) -> TestClient:
    """A client of the same collector with a key of project ``other``."""
    key: str = runs_api.app.state.services.keys.create("other")  # type: ignore[attr-defined]
    return TestClient(runs_api.app, headers={"X-API-Key": key})


@pytest.fixture
def counting() -> Iterator[CountingApp]:
    """An OpenAI stub on a socket of its own, behind a counter of requests in flight."""
    stub = OpenAIStub()
    app = CountingApp(stub)
    with serve(app) as url:
        stub.url = url
        yield app


@pytest.fixture
def counted_api(settings: Settings, counting: CountingApp) -> Iterator[TestClient]:
    """A collector whose OpenAI calls go to the counting stub."""
    counted = settings.model_copy(
        update={
            "openai_base_url": f"{counting.stub.url}/v1",
            "openai_api_key": SecretStr(OPENAI_KEY),
            "provider_retry_base_delay": 0.01,
            "provider_retry_max_delay": 0.05,
        }
    )
    with TestClient(create_app(counted), headers=DEFAULT_AUTH) as client:
        yield client
