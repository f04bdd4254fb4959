"""Steps for deletes and analytics: the records they log over a period, posted in one batch."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


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
