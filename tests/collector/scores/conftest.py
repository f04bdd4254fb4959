"""Fixtures for scores: one collector per test module on a database of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.databases import ReusableDatabase, drop_database
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY


@pytest.fixture(scope="module")
def scores_api(
    store_url: str,
    reusable_database: ReusableDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TestClient]:
    """One collector on a fresh database for the module, as project default.

    The database is a copy of the process's migrated template (tests/databases.py), not
    migrated anew: the collector's start finds every migration applied.
    """
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=Path(tmp_path_factory.mktemp("scores")),
        init_api_key=DEFAULT_KEY,
    )
    reusable_database.make_migrated(settings.database)
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as client:
        yield client
    drop_database(store_url, settings.database)


@pytest.fixture(scope="module")
def other_api(scores_api: TestClient) -> TestClient:
    """A client of the same collector with a key of project ``other``."""
    key: str = scores_api.app.state.services.keys.create("other")
    return TestClient(scores_api.app, headers={"X-API-Key": key})
