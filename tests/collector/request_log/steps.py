"""Steps for the request log: a record's body, a batch logged, the ids a list answers and
the ids it should answer, a store held as it was before a merge or without an index's view, a
store that notes the queries it runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.migrations import migrate
from promptrail.collector.store.requests import RequestStore


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


def post_batch(api: TestClient, records: list[dict[str, Any]]) -> None:
    """Log ``records`` in one batch, every one of them accepted."""
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code in (200, 201, 207), response.text
    assert not response.json()["data"].get("rejected"), response.text


def expected(records: list[dict[str, Any]], **wanted: Any) -> list[str]:
    """The ids the request list should show for the filters ``wanted``, newest first, worked
    out in Python: ``metadata.<key>``, ``prompt_name``, ``status``, ``model``, ``kind`` (model
    calls by default), ``environment`` and the dates, as the list takes them."""
    metadata = {k.removeprefix("metadata."): v for k, v in wanted.items() if "." in k}
    kinds = wanted.get("kind", "llm,embedding")
    environments = wanted.get("environment")
    start, end = wanted.get("start_date"), wanted.get("end_date")
    hits = [
        r
        for r in records
        if all(r["metadata"].get(k) == v for k, v in metadata.items())
        and r["prompt_name"] == wanted.get("prompt_name", r["prompt_name"])
        and r.get("status", "success") == wanted.get("status", r.get("status", "success"))
        and r["model"] == wanted.get("model", r["model"])
        and (kinds == "all" or r.get("kind", "llm") in kinds.split(","))
        and (environments is None or r.get("environment", "production") in environments)
        and (start is None or r["created_at"][:10] >= start)
        and (end is None or r["created_at"][:10] <= end)
    ]
    hits.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return [r["id"] for r in hits]


@contextmanager
def noting_store(
    settings: Settings, lower: bool = False
) -> Iterator[tuple[RequestStore, list[str]]]:
    """A request store of the test's database on a client of its own that notes the SQL of
    each query it runs (with ``lower``, a windowed read's lower bound after it)."""
    client = open_client(settings.clickhouse_url)
    ran: list[str] = []
    query = client.query

    def noted(sql: str, *args: Any, **kwargs: Any) -> Any:
        bound = (kwargs.get("parameters") or {}).get("lower") if lower else None
        ran.append(sql if bound is None else f"{sql} -- lower {bound.isoformat()}")
        return query(sql, *args, **kwargs)

    client.query = noted  # type: ignore[method-assign]
    try:
        yield RequestStore(client, settings.database), ran
    finally:
        close_client(client)


@contextmanager
def merges_stopped(api: TestClient, *tables: str) -> Iterator[None]:
    """Keep every retried copy and tombstone of ``tables`` as its own row, as before a
    background merge."""
    client = api.app.state.services.store.client  # type: ignore[attr-defined]
    for table in tables:
        client.command(f"SYSTEM STOP MERGES {table}")
    try:
        yield
    finally:
        for table in tables:
            client.command(f"SYSTEM START MERGES {table}")


@contextmanager
def view_detached(api: TestClient, view: str) -> Iterator[None]:
    """Writes made inside reach the records but not the index the view ``view`` keeps: an index
    entry left live under a record tombstoned in ``requests`` alone."""
    services = api.app.state.services  # type: ignore[attr-defined]
    services.records.settle()  # what was logged before is stored and indexed
    name = f"`{services.store.database}`.{view}"
    services.store.client.command(f"DETACH TABLE {name}")
    try:
        yield
    finally:
        services.store.client.command(f"ATTACH TABLE {name}")


def assert_migrations_recorded(settings: Settings) -> None:
    """Every migration of the store is recorded as done: a start-up would run none again."""
    client = open_client(settings.store_url)
    try:
        assert migrate(client, settings.database) == []
    finally:
        client.close()
