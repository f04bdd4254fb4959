"""Steps the audit tests share: reading the log through its route and the raw table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.access.principal import Role

PASSWORD = "correct horse battery"
PROMPT = {"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"}

# conftest.py's ``sign_in``: a browser signed in with a role in project default, and the CSRF
# header its writes send.
SignIn = Callable[[Role], tuple[TestClient, dict[str, str]]]


def entries(api: TestClient, **params: Any) -> list[dict[str, Any]]:
    """The project's audit entries, newest first, as its admin lists them."""
    response = api.get("/v1/audit", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def newest(api: TestClient) -> dict[str, Any]:
    """The newest audit entry."""
    return entries(api, limit=1)[0]


def raw_table(api: TestClient) -> str:
    """Every stored audit row as text, every column: what a reader of the store's files sees."""
    services = api.app.state.services  # type: ignore[attr-defined]
    table = services.audit.store.table
    services.audit.store.settle()  # what was journaled is in the table
    rows = services.store.client.query(f"SELECT * FROM {table}").result_rows
    return "\n".join(repr(row) for row in rows)
