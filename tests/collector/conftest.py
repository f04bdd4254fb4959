"""Fixtures for runs: a collector (in process) whose runs go to the stubs (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.keys import DEFAULT_AUTH


@pytest.fixture
def runs_api(run_settings: Settings) -> Iterator[TestClient]:
    """A collector (ASGI, in process) whose runs go to the stubs; project default."""
    app = create_app(run_settings)
    with TestClient(app, headers=DEFAULT_AUTH) as client:
        yield client
