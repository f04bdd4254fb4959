"""The audit log's chain, as ``promptrail audit verify`` checks it: a good chain passes, and
an entry edited, removed or moved in the store is named, with the count of those before it.

The command runs through typer's runner on the test's own store (no collector on the data
dir, so it opens the store itself); the tampering goes straight to the table, as someone with
the store's files or its SQL would.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from promptrail.collector.cli.root import app as cli_app
from promptrail.collector.config import Settings
from tests.collector.audit.steps import PROMPT, entries


def verify(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``promptrail audit verify --data-dir`` on the test's store; the runner's result."""
    monkeypatch.setenv("PROMPTRAIL_CLICKHOUSE_URL", settings.store_url)
    monkeypatch.setenv("PROMPTRAIL_DATABASE", settings.database)
    data_dir = tmp_path / "cli"  # no collector's runtime file there: the command opens the store
    data_dir.mkdir()
    return CliRunner().invoke(cli_app, ["audit", "verify", "--data-dir", str(data_dir)])


def four_writes(api: TestClient) -> list[dict[str, Any]]:
    """Create, change, label and delete a prompt; return the four entries, oldest first."""
    assert api.post("/v1/prompts", json=PROMPT).status_code == 201
    assert api.patch("/v1/prompts/greet", json={"template": "Hello {{n}}"}).status_code == 200
    assert api.put("/v1/prompts/greet/labels/production", json={"version": 2}).status_code == 200
    assert api.delete("/v1/prompts/greet").status_code == 200
    return list(reversed(entries(api)))


def rows(api: TestClient) -> tuple[Any, str, list[list[Any]]]:
    services = api.app.state.services  # type: ignore[attr-defined]
    client, table = services.store.client, services.audit.store.table
    services.audit.store.settle()  # what was journaled is in the table
    stored = client.query(f"SELECT * FROM {table} ORDER BY seq").result_rows
    return client, table, [list(r) for r in stored]


def delete_seqs(client: Any, table: str, *seqs: int) -> None:
    client.command(
        f"ALTER TABLE {table} DELETE WHERE has({{seqs:Array(UInt64)}}, seq)",
        parameters={"seqs": list(seqs)},
        settings={"mutations_sync": 2},
    )


def insert(client: Any, table: str, *stored: list[Any]) -> None:
    names = ["seq", "id", "at", "project", "actor", "resource_type", "resource_id", "entry", "hash"]
    client.insert(table, list(stored), column_names=names)


def test_a_good_chain_verifies_and_anyone_can_recompute_it(
    api: TestClient, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = four_writes(api)
    assert [e["action"] for e in written] == [
        "prompt.create",
        "prompt.update",
        "label.move",
        "prompt.delete",
    ]
    # The documented formula, recomputed here with nothing of the collector's code.
    prev = "0" * 64
    for entry in written:
        assert entry["prev_hash"] == prev
        body = {k: v for k, v in entry.items() if k != "hash"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        prev = hashlib.sha256((prev + text).encode("utf-8")).hexdigest()
        assert entry["hash"] == prev
    result = verify(settings, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "4 entries" in result.output and prev in result.output


def test_an_empty_log_verifies(
    api: TestClient, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = verify(settings, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "0 entries" in result.output


@pytest.mark.parametrize("tamper", ["edited", "deleted", "swapped"])
def test_verify_names_the_first_entry_that_does_not_match(
    api: TestClient,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tamper: str,
) -> None:
    written = four_writes(api)
    client, table, stored = rows(api)
    second, third = stored[1], stored[2]
    if tamper == "edited":
        # Someone hides who moved a label: the content changes, the hash is left as it was.
        delete_seqs(client, table, 2)
        insert(client, table, [*second[:7], second[7].replace("Hello", "Howdy"), second[8]])
        bad_seq, bad_id, reason = 2, written[1]["id"], "edited"
    elif tamper == "deleted":
        delete_seqs(client, table, 2)
        bad_seq, bad_id, reason = 3, written[2]["id"], "entry 2 is missing"
    else:
        # Two entries change places, each keeping its own content and hash.
        delete_seqs(client, table, 2, 3)
        insert(client, table, [2, *third[1:]], [3, *second[1:]])
        bad_seq, bad_id, reason = 2, written[2]["id"], "prev_hash"
    result = verify(settings, tmp_path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert f"audit entry {bad_seq} ({bad_id}) does not match" in result.output
    assert reason in result.output
    assert "1 entries before it match" in result.output
