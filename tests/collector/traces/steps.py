"""Steps for traces, sessions and users: a span's record, logged records, a list walked
page by page, a list read whole.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient


def span(
    trace: str,
    i: int,
    at: datetime,
    *,
    kind: str = "llm",
    parent: int | None = 0,
    **extra: Any,
) -> dict[str, Any]:
    """Record ``i`` of ``trace`` at ``at``: under span 0 unless ``parent`` is None (a root)."""
    made: dict[str, Any] = {
        "id": f"req_{trace[:6]}-{i:03d}",
        "created_at": at.isoformat(),
        "trace_id": trace,
        "span_id": f"{i:016x}",
        "span_name": f"{kind}-{i}",
        "kind": kind,
        **extra,
    }
    if kind in ("llm", "embedding"):
        made.setdefault("model", "gpt-4o-mini")
        made.setdefault(
            "usage", {"prompt_tokens": 4, "completion_tokens": 1, "estimated_cost_usd": 0.25}
        )
    if parent is not None:
        made["parent_span_id"] = f"{parent:016x}"
    return made


def log(api: TestClient, records: list[dict[str, Any]]) -> None:
    """Log ``records`` through the batch route, 500 at a time, every one accepted."""
    for at in range(0, len(records), 500):
        batch = records[at : at + 500]
        response = api.post("/v1/requests/batch", json={"records": batch})
        assert response.json()["data"] == {"accepted": len(batch), "rejected": []}, response.text


def walk(api: TestClient, path: str, limit: int, **params: Any) -> list[dict[str, Any]]:
    """Every item of a list through its cursors."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        response = api.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["data"]) <= limit
        found += body["data"]
        cursor = body["pagination"].get("next_cursor")
        assert body["pagination"]["has_more"] is (cursor is not None)
        if not cursor:
            return found


def read_whole(api: TestClient, path: str, limit: int, **params: Any) -> tuple[dict[str, Any], int]:
    """A trace or session through the pages of its items: the summary, every item, the pages."""
    summary: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        response = api.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        pages += 1
        page_items = body["data"].pop("items")
        assert len(page_items) <= limit
        assert summary in ({}, body["data"])  # every page carries the same summary
        summary = body["data"]
        items += page_items
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return {**summary, "items": items}, pages
