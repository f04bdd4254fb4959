"""Fixtures of the request log's tests."""

from __future__ import annotations

import pytest

from promptrail.collector.config import Settings


@pytest.fixture
def rollup_settings(settings: Settings) -> Settings:
    """A collector that may seal an hour as soon as nothing touches it (no settle time)."""
    return settings.model_copy(update={"rollup_settle_seconds": 0.0})
