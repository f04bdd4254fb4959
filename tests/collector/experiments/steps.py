"""Steps the experiment tests take over HTTP: post and check the status, wait for an
experiment to finish, read every page of a list (all its results)."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient


def post(api: TestClient, path: str, body: dict[str, Any], status: int = 201) -> Any:
    """POST ``body``; check the status; return the answer's ``data``."""
    response = api.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()["data"]


def finished(api: TestClient, experiment_id: str, timeout: float = 60) -> dict[str, Any]:
    """Wait until the experiment is no longer running; return it."""
    deadline = time.monotonic() + timeout
    while True:
        data: dict[str, Any] = api.get(f"/v1/experiments/{experiment_id}").json()["data"]
        if data["status"] != "running":
            return data
        assert time.monotonic() < deadline, data
        time.sleep(0.05)


def every_page(api: TestClient, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of the list at ``path``, following the cursor (``params`` on each page)."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = api.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        found += body["data"]
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return found


def results(api: TestClient, experiment_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """Every result of the experiment, following the cursor ``limit`` at a time."""
    return every_page(api, f"/v1/experiments/{experiment_id}/results", limit=limit)
