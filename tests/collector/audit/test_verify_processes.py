"""``promptrail audit verify`` as an operator runs it, real processes: through the collector
that holds the embedded data dir (its loopback route), then on the data dir itself once the
collector has stopped (the journal applied at its stop: the same chain, the same head); and
a backup made through the running collector, restored elsewhere, verifies with its head."""

from __future__ import annotations

from pathlib import Path

from tests.collector.processes import cli, collector


def test_verify_through_the_running_collector_and_on_its_stopped_data_dir(
    tmp_path: Path,
) -> None:
    data_dir = str(tmp_path)
    log: list[str] = []
    with collector(tmp_path, log) as api:
        prompt = {"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"}
        assert api.post("/v1/prompts", json=prompt).status_code == 201
        assert api.patch("/v1/prompts/greet", json={"template": "Hello"}).status_code == 200
        listed = api.get("/v1/audit").json()["data"]
        assert [e["action"] for e in listed] == ["prompt.update", "prompt.create"]
        running = cli("audit", "verify", "--data-dir", data_dir)
        assert running.returncode == 0, running.stdout + running.stderr
    assert log[-1] == "exit=0", log[0]
    assert "2 entries" in running.stderr and listed[0]["hash"] in running.stderr

    stopped = cli("audit", "verify", "--data-dir", data_dir)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "2 entries" in stopped.stderr and listed[0]["hash"] in stopped.stderr


def test_a_backup_made_through_the_running_collector_carries_every_entry(
    tmp_path: Path,
) -> None:
    source, backup, target = tmp_path / "source", tmp_path / "backup", tmp_path / "target"
    log: list[str] = []
    with collector(source, log) as api:
        for name in ("a", "b", "c"):
            prompt = {"name": name, "template": "Hi", "model": "gpt-4o"}
            assert api.post("/v1/prompts", json=prompt).status_code == 201
        head = api.get("/v1/audit", params={"limit": 1}).json()["data"][0]["hash"]
        # Right after the writes: entries still in the audit journal must be in the copy.
        made = cli("backup", str(backup), "--data-dir", str(source))
        assert made.returncode == 0, made.stderr
    restored = cli("restore", str(backup), "--data-dir", str(target))
    assert restored.returncode == 0, restored.stderr
    checked = cli("audit", "verify", "--data-dir", str(target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "3 entries" in checked.stderr and head in checked.stderr
