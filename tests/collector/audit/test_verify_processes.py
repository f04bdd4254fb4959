"""``promptrail audit verify`` as an operator runs it, real processes: through the collector
that holds the embedded data dir (its loopback route), then on the data dir itself once the
collector has stopped (the journal applied at its stop: the same chain, the same head)."""

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
