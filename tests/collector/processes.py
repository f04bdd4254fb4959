"""The collector's command line as a user runs it: real ``promptrail`` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from promptrail.testing import free_port

CLI = Path(sys.executable).parent / "promptrail"
KEY = "pr-serve-test-key"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``promptrail`` with ``args`` to its end and return what it did."""
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def start_collector_process(
    data_dir: Path, env: dict[str, str]
) -> tuple[int, subprocess.Popen[str]]:
    """Start ``promptrail serve`` on a free port with exactly ``env``; its output is on stdout."""
    port = free_port()
    process = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    return port, process


@contextmanager
def held_store(data_dir: Path) -> Iterator[int]:
    """Hold the embedded store of ``data_dir`` from another process; yield that process's id."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, clickhouse_connect; "
            f"held = clickhouse_connect.get_client(dsn='chdb://{data_dir / 'clickhouse'}'); "
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.communicate("", timeout=30)


@contextmanager
def collector(
    data_dir: Path,
    log: list[str],
    env: dict[str, str] | None = None,
    lines: list[str] | None = None,
) -> Iterator[httpx.Client]:
    """Run ``promptrail serve`` until the block ends, then stop it with SIGTERM.

    The client it yields is authenticated with ``KEY`` (project default). ``lines`` receives
    the collector's output line by line as it comes, ``log`` all of it and the exit status
    once it stopped.
    """
    lines = [] if lines is None else lines
    port, process = start_collector_process(
        data_dir, {**os.environ, "PROMPTRAIL_INIT_API_KEY": KEY, **(env or {})}
    )
    reader = threading.Thread(target=_read_lines, args=(process, lines), daemon=True)
    reader.start()
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": KEY}, timeout=30
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "".join(lines)
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "collector did not start"
            time.sleep(0.1)
        yield client
    finally:
        client.close()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
        log.append("".join(lines))
        log.append(f"exit={process.returncode}")


def _read_lines(process: subprocess.Popen[str], lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
