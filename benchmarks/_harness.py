"""What every benchmark shares to run servers: a free port, a process (its output in a log) that
is always stopped, waiting until a URL answers, ``promptrail serve`` on a data directory, and
checking an answer's status.

The benchmarks import nothing from ``tests/``: the provider stubs they need are the package's
(``promptrail.testing``), as ``promptrail stub-provider`` serves them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from promptrail.collector.runtime_file import read_runtime
from promptrail.testing import free_port

# A ceiling, not an expectation: start-up applies pending migrations first, and copying a
# large store takes minutes.
HEALTH_TIMEOUT = 900.0
STOP_TIMEOUT = 120.0


def promptrail_command() -> list[str]:
    """Return the ``promptrail`` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("promptrail")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("promptrail")
    if found is None:
        raise SystemExit("promptrail is not installed: run `make install` first")
    return [found]


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without promptrail or provider settings, plus ``settings``.

    What a benchmark measures is the defaults (the embedded store) and what it sets itself,
    never what the shell it runs in happens to export.
    """
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PROMPTRAIL_", "OPENAI_", "ANTHROPIC_"))
    }
    return {**kept, **settings}


def tail(path: Path | None, lines: int = 30) -> str:
    """Return the last lines of a log file."""
    if path is None:
        return "(no log)"
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM a process and wait for it; SIGKILL if it does not stop in time."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=STOP_TIMEOUT)


@contextlib.contextmanager
def process(
    command: list[str], env: Mapping[str, str], log_path: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a process (own session, output to ``log_path`` or nowhere) until the block ends."""
    with contextlib.ExitStack() as files:
        log = files.enter_context(log_path.open("wb")) if log_path else subprocess.DEVNULL
        # Its own session: a Ctrl-C in the terminal reaches the benchmark, which stops it.
        child = subprocess.Popen(
            command, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield child
    finally:
        stop(child)
        if child.returncode not in (0, -signal.SIGTERM):
            print(f"  {command[0]} exited with {child.returncode}:\n{tail(log_path)}")


def wait_until(
    url: str,
    what: str,
    child: subprocess.Popen[bytes] | None = None,
    log_path: Path | None = None,
) -> None:
    """Poll ``url`` until it answers below 500; fail if ``child`` exits first or time runs out."""
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if child is not None and child.poll() is not None:
            raise RuntimeError(f"{what} exited with {child.returncode}:\n{tail(log_path)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=5).status_code < 500:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer at {url} within {HEALTH_TIMEOUT:.0f} s")


def check(response: httpx.Response, expected: int = 200) -> httpx.Response:
    """Raise with the error body when a response is not the expected status."""
    if response.status_code != expected:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path} -> "
            f"{response.status_code}: {response.text[:500]}"
        )
    return response


@dataclass(frozen=True)
class Collector:
    """A running ``promptrail serve``: its base URL and its process."""

    url: str
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def collector(data_dir: Path, api_key: str, **settings: str) -> Iterator[Collector]:
    """Run ``promptrail serve`` on ``data_dir`` at a free port until the block ends.

    ``api_key`` is the default project's key; ``settings`` are further environment variables
    (``PROMPTRAIL_MAX_BODY_BYTES=...``, ``OPENAI_BASE_URL=...``). Its log is
    ``data_dir/collector.log``. Yields once ``GET /health`` answers.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [*promptrail_command(), "serve", "--port", str(port), "--data-dir", str(data_dir)]
    env = clean_env(PROMPTRAIL_INIT_API_KEY=api_key, **settings)
    log_path = data_dir / "collector.log"
    url = f"http://127.0.0.1:{port}"
    with process(command, env, log_path) as child:
        wait_until(f"{url}/health", "the collector", child, log_path)
        yield Collector(url, child)


def stall_store(
    running: Collector, data_dir: Path, mode: str = "fail", seconds: float = 5.0
) -> None:
    """Make the collector's request-log inserts fail (``fail``) or wait ``seconds`` (``slow``).

    The collector must run with ``PROMPTRAIL_FAULT_INJECTION=1``; ``data_dir`` holds its
    runtime file (the admin token). Real ClickHouse insert limits, see collector/store/faults.py.
    """
    _store_admin(running, data_dir, "stall", {"mode": mode, "seconds": seconds})


def resume_store(running: Collector, data_dir: Path) -> None:
    """Undo :func:`stall_store`: the store takes inserts again."""
    _store_admin(running, data_dir, "resume", None)


def _store_admin(
    running: Collector, data_dir: Path, action: str, body: dict[str, object] | None
) -> None:
    info = read_runtime(data_dir)
    if info is None:
        raise RuntimeError(f"no collector runtime file in {data_dir}")
    response = httpx.post(
        f"{running.url}/v1/admin/store/{action}",
        json=body,
        headers={"X-Promptrail-Admin": info.admin_token},
        timeout=30,
    )
    response.raise_for_status()
