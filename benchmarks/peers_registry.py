"""The prompt registry side by side with its peers, the same work for each, in the same run.

Command (what ``make bench-peers`` runs; the peers live in a benchmark-only venv)::

    python3 -m venv .bench-venv && .bench-venv/bin/pip install arize-phoenix mlflow httpx
    .venv/bin/python benchmarks/peers_registry.py --prompts 200

The work (issue 35): ``--prompts`` prompts x 3 versions loaded by 8 concurrent clients (create,
then two new versions; a ``production`` label on version 2); 500 fetches of the template by
label in one seeded random order, one request at a time; 20 new versions of one prompt in a
row. Each system starts fresh on its own data directory:

- promptrail: ``promptrail serve`` on the embedded store, over HTTP (one keep-alive connection
  for the sequential parts);
- Arize Phoenix: ``phoenix serve`` (SQLite), over its REST API, the same way;
- MLflow: its prompt registry through the Python API (``mlflow.genai``) on a SQLite tracking
  store, in a worker process of the benchmark venv: no HTTP, so its figures flatter it.

Nothing here is needed by ``make test``; a peer that is not installed is skipped and said so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from _harness import check, collector

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENV = ROOT / ".bench-venv" / "bin"
API_KEY = "pr-bench-" + "0" * 32
WORKERS = 8
FETCHES = 500
NEW_VERSIONS = 20
SEED = 20261126


def percentiles(values: Sequence[float]) -> tuple[float, float]:
    """Return (p50, p95) of ``values``."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def template(i: int, v: int) -> str:
    """The template text of prompt ``i`` at version ``v`` (the same for every system)."""
    return f"You are assistant {i}, version {v}. Answer the question: {{question}}"


class HttpPeer:
    """A registry over HTTP: how to create, add a version, label and fetch by label."""

    name = ""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.base_url = base_url
        self.headers = headers

    def client(self, pooled: int = 1) -> httpx.Client:
        limits = httpx.Limits(max_connections=pooled, max_keepalive_connections=pooled)
        return httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=120, limits=limits
        )

    def create(self, client: httpx.Client, name: str, text: str) -> None:
        raise NotImplementedError

    def new_version(self, client: httpx.Client, name: str, text: str) -> None:
        raise NotImplementedError

    def label_version_2(self, client: httpx.Client, name: str) -> None:
        raise NotImplementedError

    def fetch(self, client: httpx.Client, name: str) -> None:
        raise NotImplementedError


class Promptrail(HttpPeer):
    name = "promptrail"

    def create(self, client: httpx.Client, name: str, text: str) -> None:
        check(client.post("/v1/prompts", json={"name": name, "template": text, "model": "m"}), 201)

    def new_version(self, client: httpx.Client, name: str, text: str) -> None:
        check(client.patch(f"/v1/prompts/{name}", json={"template": text}))

    def label_version_2(self, client: httpx.Client, name: str) -> None:
        check(client.put(f"/v1/prompts/{name}/labels/production", json={"version": 2}))

    def fetch(self, client: httpx.Client, name: str) -> None:
        check(client.get(f"/v1/prompts/{name}/versions/by-label/production/template"))


class Phoenix(HttpPeer):
    name = "Arize Phoenix"

    @staticmethod
    def _version(text: str) -> dict[str, Any]:
        return {
            "model_provider": "OPENAI",
            "model_name": "m",
            "template": {"type": "chat", "messages": [{"role": "user", "content": text}]},
            "template_type": "CHAT",
            "template_format": "F_STRING",
            "invocation_parameters": {"type": "openai", "openai": {}},
        }

    def create(self, client: httpx.Client, name: str, text: str) -> None:
        body = {"prompt": {"name": name}, "version": self._version(text)}
        check(client.post("/v1/prompts", json=body))

    def new_version(self, client: httpx.Client, name: str, text: str) -> None:
        # Phoenix makes a new version when a prompt of that name is posted again.
        self.create(client, name, text)

    def label_version_2(self, client: httpx.Client, name: str) -> None:
        versions = check(client.get(f"/v1/prompts/{name}/versions")).json()["data"]
        second = sorted(versions, key=lambda v: v["id"])[1]["id"]
        check(client.post(f"/v1/prompt_versions/{second}/tags", json={"name": "production"}), 204)

    def fetch(self, client: httpx.Client, name: str) -> None:
        check(client.get(f"/v1/prompts/{name}/tags/production"))


def run_http(peer: HttpPeer, prompts: int) -> dict[str, Any]:
    """The work against one HTTP registry; return its figures."""
    names = [f"bench-{i}" for i in range(prompts)]
    created: list[float] = []
    lock = threading.Lock()

    def load(i: int) -> None:
        started = time.perf_counter()
        peer.create(client, names[i], template(i, 1))
        with lock:
            created.append((time.perf_counter() - started) * 1000)
        peer.new_version(client, names[i], template(i, 2))
        peer.new_version(client, names[i], template(i, 3))
        peer.label_version_2(client, names[i])

    with peer.client(WORKERS) as client, ThreadPoolExecutor(WORKERS) as pool:
        started = time.perf_counter()
        list(pool.map(load, range(prompts)))
        load_seconds = time.perf_counter() - started
    rng = random.Random(SEED)
    order = [rng.choice(names) for _ in range(FETCHES)]
    fetch_ms: list[float] = []
    version_ms: list[float] = []
    with peer.client() as client:
        for name in order:
            started = time.perf_counter()
            peer.fetch(client, name)
            fetch_ms.append((time.perf_counter() - started) * 1000)
        for v in range(NEW_VERSIONS):
            started = time.perf_counter()
            peer.new_version(client, names[0], template(0, 4 + v))
            version_ms.append((time.perf_counter() - started) * 1000)
    return {
        "load_seconds": load_seconds,
        "create_ms": percentiles(created),
        "fetch_ms": percentiles(fetch_ms),
        "new_version_ms": percentiles(version_ms),
    }


@contextlib.contextmanager
def phoenix(data_dir: Path) -> Iterator[str]:
    """A fresh ``phoenix serve`` on SQLite in ``data_dir``; yields its URL."""
    from promptrail.testing import free_port

    port, grpc = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(data_dir),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
    }
    log = (data_dir / "phoenix.log").open("w")
    process = subprocess.Popen(
        [str(BENCH_VENV / "phoenix"), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/prompts", timeout=5).status_code == 200:
                    break
            if process.poll() is not None:
                raise SystemExit(f"phoenix exited; see {data_dir / 'phoenix.log'}")
            time.sleep(1)
        else:
            raise SystemExit("phoenix did not answer within 300 s")
        yield url
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
        if process.poll() is None:
            process.kill()
        log.close()


MLFLOW_WORKER = textwrap.dedent(
    """
    import json, random, statistics, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    import mlflow
    import mlflow.genai

    uri, prompts, workers, fetches, new_versions, seed = sys.argv[1:7]
    prompts, workers, fetches, new_versions = (
        int(prompts), int(workers), int(fetches), int(new_versions)
    )
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    names = [f"bench-{i}" for i in range(prompts)]

    def template(i, v):
        return f"You are assistant {i}, version {v}. Answer the question: {{{{question}}}}"

    created, lock = [], threading.Lock()

    def load(i):
        started = time.perf_counter()
        mlflow.genai.register_prompt(name=names[i], template=template(i, 1))
        with lock:
            created.append((time.perf_counter() - started) * 1000)
        mlflow.genai.register_prompt(name=names[i], template=template(i, 2))
        mlflow.genai.register_prompt(name=names[i], template=template(i, 3))
        mlflow.genai.set_prompt_alias(names[i], alias="production", version=2)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(load, range(prompts)))
    load_seconds = time.perf_counter() - started
    rng = random.Random(int(seed))
    order = [rng.choice(names) for _ in range(fetches)]

    def pct(values):
        ordered = sorted(values)
        return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]

    fetch_ms = []
    for name in order:
        started = time.perf_counter()
        # cache_ttl_seconds=0: every fetch reads the store, as the other systems' do
        try:
            mlflow.genai.load_prompt(f"prompts:/{name}@production", cache_ttl_seconds=0)
        except TypeError:
            mlflow.genai.load_prompt(f"prompts:/{name}@production")
        fetch_ms.append((time.perf_counter() - started) * 1000)
    version_ms = []
    for v in range(new_versions):
        started = time.perf_counter()
        mlflow.genai.register_prompt(name=names[0], template=template(0, 4 + v))
        version_ms.append((time.perf_counter() - started) * 1000)
    print(json.dumps({
        "load_seconds": load_seconds, "create_ms": pct(created),
        "fetch_ms": pct(fetch_ms), "new_version_ms": pct(version_ms),
    }))
    """
)


def run_mlflow(data_dir: Path, prompts: int) -> dict[str, Any]:
    """The work against MLflow's prompt registry (Python API, SQLite) in a worker process."""
    uri = f"sqlite:///{data_dir / 'mlflow.db'}"
    done = subprocess.run(
        [
            str(BENCH_VENV / "python"),
            "-c",
            MLFLOW_WORKER,
            uri,
            str(prompts),
            str(WORKERS),
            str(FETCHES),
            str(NEW_VERSIONS),
            str(SEED),
        ],
        capture_output=True,
        text=True,
        cwd=data_dir,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def table(results: dict[str, dict[str, Any]], prompts: int) -> str:
    """The figures as a markdown table, one column per system."""
    systems = list(results)
    rows = [
        "| figure | " + " | ".join(systems) + " |",
        "|---|" + "---:|" * len(systems),
    ]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        rows.append(f"| {label} | " + " | ".join(cell(results[s]) for s in systems) + " |")

    row("new version, p50 / p95 ms", lambda r: "{:.1f} / {:.1f}".format(*r["new_version_ms"]))
    row(
        f"load {prompts} x 3 versions + a label, {WORKERS} clients",
        lambda r: f"{r['load_seconds']:.1f} s",
    )
    row("create under that load, p50 / p95 ms", lambda r: "{:.1f} / {:.1f}".format(*r["create_ms"]))
    row(
        f"template by label, {FETCHES} fetches, p50 / p95 ms",
        lambda r: "{:.1f} / {:.1f}".format(*r["fetch_ms"]),
    )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the work against each system; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, default=200, help="prompts to load [200]")
    parser.add_argument(
        "--only", choices=("promptrail", "phoenix", "mlflow"), action="append", default=None
    )
    args = parser.parse_args(argv)
    wanted = args.only or ["promptrail", "phoenix", "mlflow"]
    results: dict[str, dict[str, Any]] = {}
    print(f"1-minute load average at the start: {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="promptrail-peers-") as tmp:
        base = Path(tmp)
        if "promptrail" in wanted:
            print("promptrail ...", flush=True)
            (base / "pr").mkdir()
            with collector(base / "pr", API_KEY) as served:
                peer = Promptrail(served.url, {"Authorization": f"Bearer {API_KEY}"})
                results["promptrail"] = run_http(peer, args.prompts)
        if "phoenix" in wanted:
            if (BENCH_VENV / "phoenix").exists():
                print("Arize Phoenix ...", flush=True)
                (base / "phx").mkdir()
                with phoenix(base / "phx") as url:
                    results["Arize Phoenix"] = run_http(Phoenix(url, {}), args.prompts)
            else:
                print("Arize Phoenix is not installed in .bench-venv: skipped", flush=True)
        if "mlflow" in wanted:
            if (BENCH_VENV / "mlflow").exists():
                print("MLflow ...", flush=True)
                (base / "mlf").mkdir()
                try:
                    results["MLflow (Python API)"] = run_mlflow(base / "mlf", args.prompts)
                except RuntimeError as exc:
                    print(f"MLflow failed: {exc}", flush=True)
            else:
                print("MLflow is not installed in .bench-venv: skipped", flush=True)
    print(f"1-minute load average at the end: {os.getloadavg()[0]:.1f}", flush=True)
    print(table(results, args.prompts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
