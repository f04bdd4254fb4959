"""Steps for deletes and analytics: the records they log over a period, posted in one batch,
the collector's services and the SQL its store runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.services.container import Services


def batch(api: TestClient, records: list[dict[str, Any]]) -> None:
    """Log ``records`` in one batch, every one accepted."""
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.json()["data"]["accepted"] == len(records), response.text


DATA = [
    {"prompt_name": "a", "version": 1, "model": "gpt-4o", "latency_ms": 100,
     "usage": {"prompt_tokens": 10, "completion_tokens": 10, "estimated_cost_usd": 0.25},
     "metadata": {"team": "x"}, "created_at": "2026-07-01T10:15:00Z"},
    {"prompt_name": "a", "version": 2, "model": "gpt-4o", "latency_ms": 300, "status": "error",
     "usage": {"prompt_tokens": 5, "completion_tokens": 0, "estimated_cost_usd": 0.5},
     "metadata": {"team": "y"}, "created_at": "2026-07-01T11:45:00Z"},
    {"prompt_name": "b", "version": 1, "model": "claude-sonnet-4", "latency_ms": 200,
     "usage": {"prompt_tokens": 100, "completion_tokens": 50, "estimated_cost_usd": 1.0},
     "metadata": {"team": "x"}, "created_at": "2026-07-02T09:00:00Z"},
]  # fmt: skip


PERIOD = {"start_date": "2026-07-01", "end_date": "2026-07-02"}


def services(api: TestClient) -> Services:
    """The services of the collector behind ``api``."""
    found: Services = api.app.state.services  # type: ignore[attr-defined]
    return found


@contextmanager
def queries_seen(api: TestClient) -> Iterator[list[str]]:
    """Every SQL text the collector's store client runs while the block runs."""
    client = services(api).store.client
    real: Callable[..., Any] = client.query
    seen: list[str] = []

    def query(sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(sql)
        return real(sql, *args, **kwargs)

    client.query = query  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del client.query  # the instance attribute goes: the class's method again


def sealed_spans(api: TestClient, start: datetime, end: datetime) -> tuple[int, int, int]:
    """How many days and hours from ``start`` to ``end`` are read from the rollup, and how
    many ranges from the log."""
    plan = services(api).rollups.plan("default", start, end)
    days = sum((b - a) // timedelta(days=1) for a, b in plan.days)
    hours = sum((b - a) // timedelta(hours=1) for a, b in plan.hours)
    return days, hours, len(plan.raw)
