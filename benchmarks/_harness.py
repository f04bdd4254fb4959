"""What every benchmark shares to run servers: a free port, a process (its output in a log) that
is always stopped, waiting until a URL answers, ``promptrail serve`` on a data directory, and
checking an answer's status; and the in-process openai provider the SDK figures call (one chat
completion, whole or streamed) with ``overhead_in_processes``.

The benchmarks import nothing from ``tests/``: the provider stubs they need are the package's
(``promptrail.testing``), as ``promptrail stub-provider`` serves them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai

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


# -- An openai client whose provider answers at once, in process (sdk_overhead.py, _burst.py,
# langchain_handler.py): the same chat completion, whole or streamed, for every figure.

COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello from the transport."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
).encode()
MESSAGES = [{"role": "user", "content": "Say hello."}]


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


# A streamed answer of 24 events: the role, 22 pieces of text, the finish with the usage.
STREAM = (
    _chunk({"role": "assistant", "content": ""})
    + b"".join(_chunk({"content": f"word{i} "}) for i in range(22))
    + _chunk({}, "stop", usage={"prompt_tokens": 12, "completion_tokens": 22, "total_tokens": 34})
    + b"data: [DONE]\n\n"
)


def _answer(request: httpx2.Request) -> httpx2.Response:
    if b'"stream":true' in request.content.replace(b" ", b""):
        return httpx2.Response(200, content=STREAM, headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, content=COMPLETION, headers={"content-type": "application/json"})


def provider_client() -> openai.OpenAI:
    """An openai client whose provider answers at once, in process (JSON, or SSE to a stream)."""
    return openai.OpenAI(
        api_key="sk-bench",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(_answer)),
    )


def async_provider_client() -> openai.AsyncOpenAI:
    """:func:`provider_client` for asyncio."""
    return openai.AsyncOpenAI(
        api_key="sk-bench",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_answer)),
    )


def call(client: openai.OpenAI, stream: bool = False) -> None:
    """One chat call; a streamed one is read to its end."""
    if stream:
        for _ in client.chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        ):
            pass
    else:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)


SDK_OVERHEAD = Path(__file__).with_name("sdk_overhead.py")


def overhead_in_processes(calls: int, processes: int, mode: str) -> dict[str, Any]:
    """Run ``sdk_overhead.py``'s ``call_overhead`` (``mode``: own, joined, stream) in fresh
    processes, one after another; return the medians over them."""
    runs: list[dict[str, float]] = []
    for _ in range(max(1, processes)):
        done = subprocess.run(
            [sys.executable, str(SDK_OVERHEAD), "--overhead-only", mode, "--calls", str(calls)],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    merged: dict[str, Any] = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    merged["added_runs"] = [run["added_p50"] for run in runs]
    return merged
