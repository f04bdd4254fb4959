"""A store outage made by ClickHouse itself, and the 503 every write answers it with.

The outage is the real table refusing inserts (``parts_to_throw_insert``: TOO_MANY_PARTS,
as when merges fall behind), never a fake client.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

RETRY_AFTER = 7
"""The ``store_retry_after_seconds`` a test's collector is given, to tell it from the default."""


@contextmanager
def failing_inserts(api: TestClient, table: str) -> Iterator[None]:
    """Every insert into ``table`` fails as when merges fall behind (it holds a part)."""
    services = api.app.state.services
    name = f"`{services.store.database}`.`{table}`"
    services.store.client.command(f"ALTER TABLE {name} MODIFY SETTING parts_to_throw_insert = 1")
    try:
        yield
    finally:
        services.store.client.command(f"ALTER TABLE {name} RESET SETTING parts_to_throw_insert")


def assert_store_unavailable(response: Any) -> None:
    """The 503 of a write the store refused: STORE_UNAVAILABLE naming ClickHouse's error,
    with the collector's ``Retry-After``."""
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    error = response.json()["error"]
    assert (error["type"], error["code"], error["details"]) == (
        "api_error",
        "STORE_UNAVAILABLE",
        {},
    )
    assert error["message"].startswith("The store is unavailable: ")
    assert "TOO_MANY_PARTS" in error["message"]
