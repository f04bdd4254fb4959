"""A live collector whose store can be stalled with ClickHouse's own mechanisms.

Shared by the collector's and the SDK's backpressure tests; the soak benchmark does the same
from outside through ``benchmarks/_harness.py`` (``stall_store`` / ``resume_store``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from clickhouse_connect.driver.client import Client

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.container import Services
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.faults import StallMode, resume_writes, stall_writes
from promptrail.testing import serve
from tests.keys import DEFAULT_AUTH


@dataclass
class Live:
    """A collector on a socket, its services, and a handle on its store to stall it."""

    url: str
    services: Services
    store: Client
    database: str

    def stall(self, mode: StallMode, seconds: float = 5.0, probe: bool = True) -> None:
        # Records are answered once in the log's journal and stored right behind it: the
        # stall begins once every record answered is stored (as when answers waited for the
        # insert), and with ``probe`` a failing store is tried at once, so the collector knows
        # it fails before the next record, as after an insert of its own failed.
        self.services.records.settle()
        stall_writes(self.store, self.database, mode, seconds)
        if probe and mode != "slow":
            self.services.records.probe()

    def resume(self) -> None:
        resume_writes(self.store, self.database)

    def post(self, record: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/requests", json=record, headers=DEFAULT_AUTH, timeout=60)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", headers=DEFAULT_AUTH, timeout=60)

    def stored_ids(self) -> list[str]:
        response = self.get("/v1/requests?limit=100")
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["data"]]

    def wait_ready(self) -> None:
        """Poll /health until it says ready (the collector recovers without help)."""
        deadline = time.monotonic() + 30
        while httpx.get(f"{self.url}/health", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the collector did not recover"
            time.sleep(0.1)


@contextmanager
def live_collector(settings: Settings, **overrides: Any) -> Iterator[Live]:
    """Serve a collector with ``settings`` changed by ``overrides``; resume its store after."""
    app = create_app(settings.model_copy(update=overrides))
    store = open_client(settings.store_url)
    try:
        with serve(app) as url:
            collector = Live(url, app.state.services, store, settings.database)
            try:
                yield collector
            finally:
                collector.resume()
    finally:
        store.close()


def record(request_id: str, padding: int = 100) -> dict[str, Any]:
    """A record with its own id and time (so a retry is stored once), ``padding`` wide."""
    return {
        "id": request_id,
        "created_at": "2026-01-02T03:04:05Z",
        "model": "gpt-4o-mini",
        "status": "success",
        "output": "x" * padding,
    }
