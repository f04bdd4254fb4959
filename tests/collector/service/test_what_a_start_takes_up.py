"""What a collector's start takes up from its store before it serves, and what it reads for it.

A start resumes the exports a stopped collector left processing and expires those past their
retention (docs/api-notes.md, "Request log"), reads the chat versions of every project with a
key for linking (docs/api-notes.md, "Chat prompts") and marks failed the experiments it left
running. Most tests start a collector on an empty store: those reads are the cost guards here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from clickhouse_connect.driver._chdbclient import ChdbClient
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app, open_services
from promptrail.collector.config import Settings
from promptrail.collector.services.dates import utc_now_ms
from tests.collector.request_log.export_steps import RECORDS, finish, start
from tests.keys import DEFAULT_AUTH


def test_a_start_expires_the_exports_past_their_retention_and_keeps_the_others(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        assert api.post("/v1/requests/batch", json={"records": RECORDS}).status_code == 201
        kept_id = start(api)["export_id"]
        assert finish(api, kept_id)["status"] == "completed"
        exports = api.app.state.services.store.exports  # type: ignore[attr-defined]
        kept = exports.get("default", kept_id)
        # A job that finished eight days ago (past the 7-day retention), with its file, as a
        # collector stopped since left it.
        old_id = "exp_finished_long_ago"
        ago = utc_now_ms() - timedelta(days=8)
        old_file = settings.exports_path / f"{old_id}.csv"
        old_file.write_bytes((settings.exports_path / f"{kept_id}.csv").read_bytes())
        exports.save(
            replace(kept, export_id=old_id, file_path=str(old_file), created_at=ago, updated_at=ago)
        )

    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as restarted:
        expired = restarted.get(f"/v1/requests/exports/{old_id}").json()["data"]
        kept_now = restarted.get(f"/v1/requests/exports/{kept_id}").json()["data"]
        kept_file = restarted.get(f"/v1/requests/exports/{kept_id}/download")

    assert expired["status"] == "expired" and expired["download_url"] is None
    assert not old_file.exists()
    assert kept_now["status"] == "completed"
    assert kept_file.status_code == 200 and "req_e1" in kept_file.text


class Queries:
    """Every query the process's embedded clients run while it is recording."""

    def __init__(self) -> None:
        self.sql: list[str] = []
        self.recording = False

    def naming(self, table: str) -> list[str]:
        """The queries recorded that read ``table`` (the store quotes every table's name)."""
        return [sql for sql in self.sql if f"`{table}`" in sql]


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> Iterator[Queries]:
    seen = Queries()
    real = ChdbClient.query

    def query(client: ChdbClient, sql: Any = None, *args: Any, **kwargs: Any) -> Any:
        if seen.recording:
            seen.sql.append(str(sql))
        return real(client, sql, *args, **kwargs)

    monkeypatch.setattr(ChdbClient, "query", query)
    yield seen


@pytest.mark.cost
def test_a_start_on_an_empty_store_reads_each_kind_of_left_work_once(
    settings: Settings, queries: Queries
) -> None:
    """The exports in one read (not one per status), the projects with a key without the
    keys' revocations and last use, and an empty registry's claims only (no claim: no version
    is reachable and no label points at one)."""
    services, _ = open_services(settings)
    try:
        queries.recording = True
        services.start()
        assert services.prompts.links.warmed.is_set()
        queries.recording = False
    finally:
        services.close()

    assert len(queries.naming("exports")) == 1
    (projects,) = queries.naming("api_keys")
    assert "`api_key_revocations`" not in projects and "`api_key_usage`" not in projects
    assert len(queries.naming("prompts")) == 1
    assert queries.naming("prompt_versions") == queries.naming("prompt_labels") == []
