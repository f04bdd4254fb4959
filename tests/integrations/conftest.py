"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.provider_clients import close_opened


@pytest.fixture(autouse=True)
def _close_provider_clients() -> Iterator[None]:
    yield
    close_opened()
