"""Fixtures for the registry: two service stacks on one embedded database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.store.database import Store


@pytest.fixture
def two_collectors(settings: Settings) -> Iterator[tuple[Services, Services]]:
    """Two independent service stacks on one database, as two collector processes."""
    stores = [
        Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
        for _ in range(2)
    ]
    both = Services.build(settings, stores[0]), Services.build(settings, stores[1])
    yield both
    for services in both:
        services.close()
