"""Steps for exports: start one, wait for it to finish; the records the export tests log."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

RECORDS = [
    {
        "id": "req_e1",
        "prompt_name": "greet",
        "version": 1,
        "model": "gpt-4o",
        "input_variables": {"name": 'Zoë, "the" tester'},
        "output": "Hello\nZoë",
        "metadata": {"team": "a"},
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "estimated_cost_usd": 0.5},
        "latency_ms": 10,
        "created_at": "2026-04-01T08:00:00Z",
    },
    {
        "id": "req_e2",
        "prompt_name": "greet",
        "status": "error",
        "error": "boom",
        "metadata": {"team": "b"},
        "created_at": "2026-04-02T08:00:00Z",
    },
    {"id": "req_e3", "prompt_name": "other", "created_at": "2026-04-03T08:00:00Z"},
]


def finish(api: TestClient, export_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """Poll an export until it is no longer processing (or ``timeout`` passes); its data."""
    deadline = time.monotonic() + timeout
    while True:
        data: dict[str, Any] = api.get(f"/v1/requests/exports/{export_id}").json()["data"]
        if data["status"] != "processing" or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def start(api: TestClient, **body: Any) -> dict[str, Any]:
    """Start an export of the records ``body`` filters; the job's data."""
    response = api.post("/v1/requests/export", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data
