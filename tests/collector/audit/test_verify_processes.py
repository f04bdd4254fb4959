"""``promptrail audit verify`` as an operator runs it, real processes: through the collector
that holds the embedded data dir (its loopback route), then on the data dir itself once the
collector has stopped (the journal applied at its stop: the same chain, the same head); and
a backup made through the running collector, restored elsewhere, verifies with its head, as
does an offline backup of a data dir whose collector was killed with entries in its journal."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from promptrail.collector.services.audit import GENESIS, canonical, chain_hash
from promptrail.collector.store.audit import AUDIT_LOG, journal_path
from promptrail.collector.store.prompts.rows import _literal
from promptrail.collector.store.writes.journal import encode_entry
from tests.collector.processes import cli, collector


def test_verify_through_the_running_collector_its_backup_and_its_stopped_data_dir(
    tmp_path: Path,
) -> None:
    # One collector for both points (a backup made through it carries every entry; verify
    # through it and on its stopped data dir give one chain): a start and a stop fewer.
    source, backup, target = tmp_path / "source", tmp_path / "backup", tmp_path / "target"
    data_dir = str(source)
    log: list[str] = []
    with collector(source, log) as api:
        prompt = {"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"}
        assert api.post("/v1/prompts", json=prompt).status_code == 201
        assert api.patch("/v1/prompts/greet", json={"template": "Hello"}).status_code == 200
        for name in ("a", "b", "c"):
            prompt = {"name": name, "template": "Hi", "model": "gpt-4o"}
            assert api.post("/v1/prompts", json=prompt).status_code == 201
        # Right after the writes: entries still in the audit journal must be in the copy.
        made = cli("backup", str(backup), "--data-dir", data_dir)
        assert made.returncode == 0, made.stderr
        listed = api.get("/v1/audit").json()["data"]
        assert [e["action"] for e in listed] == [
            "prompt.create", "prompt.create", "prompt.create", "prompt.update", "prompt.create",
        ]  # fmt: skip
        head = listed[0]["hash"]
        running = cli("audit", "verify", "--data-dir", data_dir)
        assert running.returncode == 0, running.stdout + running.stderr
    assert log[-1] == "exit=0", log[0]
    assert "5 entries" in running.stderr and head in running.stderr

    stopped = cli("audit", "verify", "--data-dir", data_dir)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "5 entries" in stopped.stderr and head in stopped.stderr

    restored = cli("restore", str(backup), "--data-dir", str(target))
    assert restored.returncode == 0, restored.stderr
    checked = cli("audit", "verify", "--data-dir", str(target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "5 entries" in checked.stderr and head in checked.stderr


def test_entries_a_killed_collector_left_in_its_journal_reach_an_offline_backup(
    tmp_path: Path,
) -> None:
    source, backup, target = tmp_path / "source", tmp_path / "backup", tmp_path / "target"
    made = cli("keys", "create", "--project", "default", "--data-dir", str(source))
    assert made.returncode == 0, made.stderr  # a store, migrated, with no audit entry yet
    # What a collector killed right after acknowledging a write leaves: the entry in the
    # journal, not yet in the table.
    entry = {
        "id": "aud_left_behind",
        "at": "2026-11-29T00:00:00.000000Z",
        "actor": {"type": "key", "id": "key_0123456789ab", "key_hint": "pr-…"},
        "role": None,
        "project": "default",
        "action": "prompt.create",
        "resource_type": "prompt",
        "resource_id": "greet",
        "ip": "127.0.0.1",
        "prev_hash": GENESIS,
    }
    text = canonical(entry)
    digest = chain_hash(GENESIS, text)
    at = datetime(2026, 11, 29, tzinfo=UTC)
    values = [1, entry["id"], at, "default", "key_0123456789ab", "prompt", "greet", text, digest]
    columns = ", ".join(AUDIT_LOG.inserted_columns())
    statement = (
        f"INSERT INTO promptrail.audit_log ({columns}) "
        f"VALUES ({', '.join(_literal(v) for v in values)})"
    )
    journal = journal_path(f"chdb://{source / 'clickhouse'}", "promptrail")
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_bytes(encode_entry(statement))

    offline = cli("backup", str(backup), "--data-dir", str(source))
    assert offline.returncode == 0, offline.stderr
    restored = cli("restore", str(backup), "--data-dir", str(target))
    assert restored.returncode == 0, restored.stderr
    checked = cli("audit", "verify", "--data-dir", str(target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 entries" in checked.stderr and digest in checked.stderr
