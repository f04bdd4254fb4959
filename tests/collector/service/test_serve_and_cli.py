"""``promptrail serve`` and ``promptrail keys create`` as a user runs them: real processes."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx

import promptrail
from tests.collector.processes import CLI, cli, collector, start_collector_process


def test_prompts_survive_a_restart_sigterm_stops_cleanly_and_keys_create_works_either_way(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    with collector(tmp_path, log) as api:
        for i in range(5):
            api.post(
                "/v1/prompts", json={"name": f"p{i}", "template": f"{i} {{x}}", "model": "gpt-4o"}
            )
        api.patch("/v1/prompts/p0", json={"template": "second"})
        api.put("/v1/prompts/p0/labels/production", json={"version": 1})
        api.delete("/v1/prompts/p4")
        before = {
            "list": api.get("/v1/prompts").json(),
            "versions": api.get("/v1/prompts/p0/versions").json(),
            "template": api.get("/v1/prompts/p0/versions/by-label/production/template").json(),
        }

    assert log[-1] == "exit=0"
    assert "store closed" in log[0]
    assert not (tmp_path / "collector.json").exists()

    # ``keys create`` with no collector running, then through the restarted one (one restart
    # for both points: a collector start fewer than a data dir of their own).
    offline = cli("keys", "create", "--project", "team-a", "--data-dir", str(tmp_path))
    assert offline.returncode == 0, offline.stderr
    offline_key = offline.stdout.strip()

    with collector(tmp_path, log) as api:
        after = {
            "list": api.get("/v1/prompts").json(),
            "versions": api.get("/v1/prompts/p0/versions").json(),
            "template": api.get("/v1/prompts/p0/versions/by-label/production/template").json(),
        }
        gone = api.get("/v1/prompts/p4").status_code

        online = cli("keys", "create", "--project", "team-a", "--data-dir", str(tmp_path))
        assert online.returncode == 0, online.stderr
        online_key = online.stdout.strip()
        headers = [{"Authorization": f"Bearer {k}"} for k in (offline_key, online_key)]
        created = api.post(
            "/v1/prompts",
            json={"name": "mine", "template": "x", "model": "gpt-4o"},
            headers=headers[0],
        )
        seen_by_other_key = api.get("/v1/prompts/mine", headers=headers[1]).status_code
        seen_by_default = api.get("/v1/prompts/mine").status_code

    assert after == before
    assert after["list"]["pagination"]["total"] == 4
    assert gone == 404
    assert offline_key.startswith("pr-") and online_key.startswith("pr-")
    assert offline_key != online_key
    assert created.status_code == 201
    assert seen_by_other_key == 200
    assert seen_by_default == 404


def without_init_key() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PROMPTRAIL_INIT_API_KEY"}


@contextmanager
def first_start(data_dir: Path) -> Iterator[tuple[int, list[str]]]:
    """Start ``promptrail serve`` with no initial key; yield its port and banner lines."""
    port, process = start_collector_process(data_dir, without_init_key())
    try:
        assert process.stdout is not None
        lines: list[str] = []
        while not any(line.lstrip().startswith("try:") for line in lines):
            line = process.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        yield port, lines
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


def works(port: int, key: str) -> bool:
    response = httpx.get(
        f"http://127.0.0.1:{port}/v1/prompts", headers={"Authorization": f"Bearer {key}"}
    )
    return response.status_code == 200


def test_a_busy_port_fails_before_a_key_is_made_then_the_first_start_prints_one_that_works(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [str(CLI), "serve", "--port", str(port), "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            env=without_init_key(),
        )

    output = refused.stdout + refused.stderr
    assert refused.returncode == 1
    assert "listening" not in output
    assert "pr-" not in output
    assert "Traceback" not in output
    assert f"127.0.0.1:{port}" in refused.stderr and "in use" in refused.stderr
    # The one-time key was not made and lost: the next start (the first that listens) shows it,
    # with the rest of its banner (one first start for both points).
    with first_start(tmp_path) as (port, lines):
        # The banner says "listening" once it is true: the port answers by now.
        assert any(f"listening on http://127.0.0.1:{port}" in line for line in lines)
        keys = [w for line in lines for w in line.split() if w.startswith("pr-")]
        assert keys, "".join(lines)
        assert works(port, keys[0])
        # The banner names the console's address, and the console answers there.
        address = next(line for line in lines if "console:" in line).split()[1]
        assert address == f"http://127.0.0.1:{port}"
        assert "<title>promptrail</title>" in httpx.get(address).text
        # The development key has every scope, and its line says so (before the banner's
        # command below makes a second key).
        (said,) = [line for line in lines if "development API key" in line]
        assert "every scope" in said
        dev_key = next(word for word in said.split() if word.startswith("pr-"))
        shown = httpx.get(
            f"http://127.0.0.1:{port}/v1/keys", headers={"Authorization": f"Bearer {dev_key}"}
        )
        assert shown.status_code == 200, shown.text
        (dev,) = shown.json()["data"]
        assert dev["scopes"] == ["ingest", "prompts:read", "read", "write", "admin"]
        assert dev["created_by"] == "start-up"

        # The banner's command, run as printed (from the same directory), makes a key.
        command = next(line for line in lines if "keys create" in line).split(": ", 1)[1]
        made = subprocess.run(
            shlex.split(command.replace("NAME", "team-b")),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
        assert works(port, made.stdout.strip())


def test_version_and_help_read_as_a_user_expects() -> None:
    # Four processes that only read: side by side, not one after another.
    commands = [["--version"], ["--help"], ["serve", "--help"], ["keys", "create", "--help"]]
    with ThreadPoolExecutor(len(commands)) as pool:
        version, *helps = pool.map(lambda command: cli(*command), commands)

    assert version.returncode == 0
    assert version.stdout.strip() == f"promptrail {promptrail.__version__}"
    for shown in helps:
        assert shown.returncode == 0, shown.stderr
        assert "--help " in shown.stdout
        assert "<bool>" not in shown.stdout and "<str>" not in shown.stdout, shown.stdout
    assert "--port PORT" in helps[1].stdout
    assert "--project NAME" in helps[2].stdout
