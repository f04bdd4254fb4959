"""Steps for the request log: a record's body, the ids a list answers."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def record(**fields: Any) -> dict[str, Any]:
    """A logged record's body: a summary prompt's call, with ``fields`` over it."""
    base: dict[str, Any] = {
        "prompt_name": "summary",
        "version": 2,
        "model": "gpt-4o-mini",
        "input_variables": {"text": "Long article about ClickHouse"},
        "output": "ClickHouse is a column store.",
        "metadata": {"user_id": "u1", "environment": "prod"},
        "usage": {"prompt_tokens": 30, "completion_tokens": 7, "estimated_cost_usd": 0.0004},
        "latency_ms": 420,
    }
    return {**base, **fields}


def ids(api: TestClient, **params: Any) -> list[str]:
    """The ids the request list answers for ``params``, newest first."""
    response = api.get("/v1/requests", params=params)
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["data"]]
