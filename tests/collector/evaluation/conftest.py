"""Fixtures of the online-evaluation tests: a client of a second project on the same app."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def other(api: TestClient) -> TestClient:
    """A client on the same app authenticated as project ``other``."""
    key: str = api.app.state.services.keys.create("other")
    return TestClient(api.app, headers={"X-API-Key": key})
