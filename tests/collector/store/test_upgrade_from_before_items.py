"""A store from before the log's list copy (migration 8) upgrades to today's schema.

Such a store's log has none of the columns later migrations add (the record kind, the token
details), while the list copy's view that migration 8 creates, and its backfill, read today's
columns: the upgrade must add them first, or it stops at migration 8.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 5, 2, 9, tzinfo=UTC)
# The log's columns that migrations after 8 add (17: kind; 21: the token details).
LATER_COLUMNS = ("kind", "cached_tokens", "cache_write_tokens", "reasoning_tokens")


def test_a_store_from_before_migration_8_upgrades_and_keeps_its_records(
    settings: Settings,
) -> None:
    db = f"`{settings.database}`"
    store_before(
        settings, 8, [], [f"ALTER TABLE {db}.requests DROP COLUMN {c}" for c in LATER_COLUMNS]
    )
    client = open_client(settings.store_url)
    try:
        for i, (model, span) in enumerate((("gpt-4o-mini", ""), ("", "0000000000000001"))):
            client.command(
                f"INSERT INTO {db}.requests (project, id, created_at, model, status, span_id, "
                "trace_id, span_name, prompt_tokens, completion_tokens, total_tokens, "
                "estimated_cost_usd, row_version, is_deleted) VALUES ('default', "
                f"'req_old-{i}', toDateTime64('{START:%Y-%m-%d %H:%M:%S}', 3, 'UTC') + {i}, "
                f"'{model}', 'success', '{span}', '{'a' * 32 if span else ''}', "
                f"'{'answer' if span else ''}', 100, 20, 120, 0.5, 1, 0)"
            )
    finally:
        client.close()

    app = create_app(settings)  # start-up applies migrations 8 to the newest
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        listed = api.get("/v1/requests", params={"kind": "all"}).json()["data"]
        assert {r["id"]: r["kind"] for r in listed} == {"req_old-0": "llm", "req_old-1": "span"}
        detail = api.get("/v1/requests/req_old-0").json()["data"]
        assert (detail["usage"]["prompt_tokens"], detail["usage"]["cached_tokens"]) == (100, 0)
        assert detail["usage"]["estimated_cost_usd"] == 0.5
        # And the upgraded log takes new records as any other.
        assert api.post("/v1/requests", json={"id": "req_new-1", "kind": "tool"}).status_code == 201
        tools = api.get("/v1/requests", params={"kind": "tool"}).json()["data"]
        assert [r["id"] for r in tools] == ["req_new-1"]
