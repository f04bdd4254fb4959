"""Walking a list of the request log page by page, as a client does."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def walk(api: TestClient, limit: int, **params: Any) -> list[str]:
    """Every id of a list, page by page through the cursors."""
    seen: list[str] = []
    cursor = None
    while True:
        query = {"limit": limit, **params}
        if cursor:
            query["cursor"] = cursor
        response = api.get("/v1/requests", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        seen += [r["id"] for r in body["data"]]
        assert len(body["data"]) <= limit
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return seen
