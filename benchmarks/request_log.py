"""Request-log benchmark: ingest and read latencies at scale on the embedded store.

    .venv/bin/python benchmarks/request_log.py --records 1000000 [--write-docs]
    .venv/bin/python benchmarks/request_log.py --records 10000000 --write-docs

Starts ``promptrail serve`` on a fresh data dir, loads synthetic but realistic records
(varied prompts, models, metadata; outputs of 200-2,000 characters) through
``POST /v1/requests/batch`` from a few client threads, then measures p50/p95 of list
(unfiltered, by prompt, by metadata), detail, search and each analytics metric over one
keep-alive connection, samples the collector's memory throughout, and finally shows with
``EXPLAIN indexes = 1`` that search is served by the trigram skip index.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "promptrail"
KEY = "pr-bench-request-log"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Request log (`benchmarks/request_log.py`)"

PROMPTS = [f"prompt-{i:03d}" for i in range(200)]
MODELS = ["gpt-4o-mini", "gpt-4o", "claude-sonnet-4", "claude-3-5-haiku", "o3-mini"]
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "clickhouse",
    "column",
    "store",
    "merge",
    "tree",
    "part",
    "granule",
    "index",
    "bloom",
    "filter",
    "token",
    "latency",
    "cost",
    "usage",
    "prompt",
    "version",
    "label",
    "template",
    "answer",
    "user",
    "question",
    "summary",
    "weather",
    "travel",
    "invoice",
    "refund",
    "shipping",
    "order",
    "account",
    "password",
    "reset",
]
RARE = "zephyrine"  # appears in 1 record in 10,000: a selective search


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def make_pool(rng: random.Random, size: int) -> list[dict[str, Any]]:
    """Record bodies to vary from: building 10M distinct texts would dominate the run."""
    pool = []
    for _ in range(size):
        prompt = rng.choice(PROMPTS)
        prompt_tokens = rng.randint(20, 2000)
        completion_tokens = rng.randint(10, 800)
        pool.append(
            {
                "prompt_name": prompt,
                "version": rng.randint(1, 5),
                "model": rng.choice(MODELS),
                "status": "error" if rng.random() < 0.03 else "success",
                "input_variables": {
                    "question": text(rng, 20, 200),
                    "lang": rng.choice(["en", "fr", "de", "es"]),
                },
                "output": text(rng, 200, 2000),
                "metadata": {
                    "user_id": f"user-{rng.randint(1, 5000)}",
                    "session_id": f"s-{rng.randint(1, 100000)}",
                    "environment": rng.choice(["prod", "staging", "dev"]),
                },
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "estimated_cost_usd": round((prompt_tokens + 4 * completion_tokens) * 1e-6, 6),
                },
                "latency_ms": rng.randint(150, 9000),
            }
        )
    return pool


def batches(total: int, size: int, pool: list[dict[str, Any]], start: datetime) -> Iterator[bytes]:
    """Yield gzip JSON batch bodies; records spread evenly over the 30 days before start."""
    span = timedelta(days=30).total_seconds()
    step = span / max(total, 1)
    rng = random.Random(7)
    for first in range(0, total, size):
        records = []
        for i in range(first, min(first + size, total)):
            body = dict(pool[i % len(pool)])
            body["id"] = f"req_bench{i:010d}"
            body["created_at"] = (start - timedelta(seconds=span - i * step)).isoformat()
            if i % 10_000 == 0:
                body["output"] = f"{body['output'][:100]} {RARE} {body['output'][100:]}"
            if rng.random() < 0.5:
                body["metadata"] = {**body["metadata"], "feature": rng.choice(["chat", "search"])}
            records.append(body)
        yield gzip.compress(json.dumps({"records": records}).encode(), compresslevel=1)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the collector), in MiB."""
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total += int(line.split()[1])
    return total / 1024


@contextmanager
def collector(data_dir: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "PROMPTRAIL_INIT_API_KEY": KEY, "PROMPTRAIL_MAX_BODY_BYTES": str(64 << 20)}
    log = (data_dir / "collector.log").open("wb")
    process = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"collector did not start; see {data_dir / 'collector.log'}")
            time.sleep(0.2)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


class MemoryWatch:
    """Samples a process's RSS every half second in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def ingest(base: str, total: int, size: int, workers: int) -> tuple[float, int]:
    pool = make_pool(random.Random(1), 2000)
    start = datetime.now(UTC)
    bodies = batches(total, size, pool, start)
    lock = threading.Lock()
    accepted = 0
    headers = {
        "Authorization": f"Bearer {KEY}",
        "Content-Encoding": "gzip",
        "Content-Type": "application/json",
    }

    def worker() -> None:
        nonlocal accepted
        with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
            while True:
                with lock:
                    body = next(bodies, None)
                if body is None:
                    return
                response = client.post("/v1/requests/batch", content=body)
                response.raise_for_status()
                with lock:
                    accepted += response.json()["data"]["accepted"]
                    if accepted % 100_000 < size:
                        print(f"  ingested {accepted:,}/{total:,}", flush=True)

    began = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool_:
        for future in [pool_.submit(worker) for _ in range(workers)]:
            future.result()
    return time.perf_counter() - began, accepted


def measure(
    client: httpx.Client,
    label: str,
    make: Callable[[int], tuple[str, dict[str, Any]]],
    samples: int,
) -> dict[str, Any]:
    for i in range(min(5, samples)):
        path, params = make(i)
        client.get(path, params=params).raise_for_status()
    times = []
    for i in range(samples):
        path, params = make(i)
        began = time.perf_counter()
        response = client.get(path, params=params)
        times.append((time.perf_counter() - began) * 1000)
        response.raise_for_status()
    times.sort()
    result = {
        "operation": label,
        "p50": statistics.median(times),
        "p95": times[int(len(times) * 0.95) - 1],
        "samples": samples,
    }
    print(f"  {label:<38} p50 {result['p50']:8.1f} ms   p95 {result['p95']:8.1f} ms", flush=True)
    return result


def reads(base: str, total: int, samples: int) -> list[dict[str, Any]]:
    rng = random.Random(3)
    results = []
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
    ) as client:
        second = client.get("/v1/requests", params={"limit": 20}).json()["pagination"][
            "next_cursor"
        ]
        ops: list[tuple[str, Callable[[int], tuple[str, dict[str, Any]]], int]] = [
            ("list, first page", lambda i: ("/v1/requests", {"limit": 20}), samples),
            (
                "list, next page (cursor)",
                lambda i: ("/v1/requests", {"limit": 20, "cursor": second}),
                samples,
            ),
            (
                "list by prompt_name",
                lambda i: ("/v1/requests", {"prompt_name": rng.choice(PROMPTS)}),
                samples,
            ),
            (
                "list by metadata.user_id",
                lambda i: ("/v1/requests", {"metadata.user_id": f"user-{rng.randint(1, 5000)}"}),
                samples,
            ),
            (
                "list by metadata + status",
                lambda i: ("/v1/requests", {"metadata.environment": "prod", "status": "error"}),
                samples,
            ),
            (
                "detail",
                lambda i: (f"/v1/requests/req_bench{rng.randrange(total):010d}", {}),
                samples,
            ),
            (
                "search, common word",
                lambda i: ("/v1/requests/search", {"query": rng.choice(WORDS[:20])}),
                max(20, samples // 5),
            ),
            (
                f"search, rare word ({RARE})",
                lambda i: ("/v1/requests/search", {"query": RARE}),
                max(20, samples // 5),
            ),
            (
                "search, absent word",
                lambda i: ("/v1/requests/search", {"query": "quuxwobble"}),
                max(10, samples // 10),
            ),
        ]
        for metric in ("cost", "usage", "latency", "errors"):
            ops.append(
                (
                    f"analytics {metric} by prompt_name",
                    lambda i, m=metric: (
                        "/v1/requests/analytics",
                        {"metric": m, "group_by": "prompt_name"},
                    ),
                    max(20, samples // 5),
                )
            )
        ops.append(
            (
                "analytics cost by day",
                lambda i: ("/v1/requests/analytics", {"metric": "cost", "group_by": "day"}),
                max(20, samples // 5),
            )
        )
        ops.append(
            (
                "analytics usage by metadata.environment",
                lambda i: (
                    "/v1/requests/analytics",
                    {"metric": "usage", "group_by": "metadata.environment"},
                ),
                max(20, samples // 5),
            )
        )
        for label, make, count in ops:
            results.append(measure(client, label, make, count))
    return results


def explain_search(data_dir: Path) -> str:
    """Run EXPLAIN on the search query directly against the stopped collector's store."""
    import clickhouse_connect

    client = clickhouse_connect.get_client(dsn=f"chdb://{data_dir / 'clickhouse'}")
    rows = client.query(
        "EXPLAIN indexes = 1 SELECT id FROM promptrail.requests "
        "WHERE project = 'default' AND search_text LIKE {q:String} "
        "ORDER BY created_at DESC, id DESC LIMIT 21",
        parameters={"q": f"%{RARE}%"},
    ).result_rows
    client.close()
    lines = [r[0] for r in rows]
    keep = [
        line
        for line in lines
        if any(k in line for k in ("Skip", "Name:", "Granules:", "Parts:", "Description:"))
    ]
    return "\n".join(keep)


def machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}"


def write_docs(
    args: argparse.Namespace,
    rate: float,
    elapsed: float,
    peak: float,
    results: list[dict[str, Any]],
    explain: str,
) -> None:
    lines = [
        SECTION,
        "",
        f"Command: `.venv/bin/python benchmarks/request_log.py --records {args.records}`  ",
        f"Machine: {machine()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d}; embedded store (chDB), collector in its own process.",
        "",
        f"- Ingest: {args.records:,} records in {elapsed:.0f} s = **{rate:,.0f} records/s** "
        f"(batches of {args.batch}, gzip, {args.workers} client threads on the same 2 cores).",
        f"- Collector memory (RSS) peak during the whole run: **{peak:.0f} MiB**.",
        "",
        "| operation | p50 ms | p95 ms | samples |",
        "|---|---:|---:|---:|",
        *[
            f"| {r['operation']} | {r['p50']:.1f} | {r['p95']:.1f} | {r['samples']} |"
            for r in results
        ],
        "",
        "Search is served by the trigram skip index (`EXPLAIN indexes = 1` of the search query, rare word):",
        "",
        "```",
        explain,
        "```",
        "",
    ]
    section = "\n".join(lines)
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n\n"
    if SECTION in text:
        before, _, rest = text.partition(SECTION)
        nxt = rest.find("\n## ")
        text = before + section + (rest[nxt + 1 :] if nxt >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="promptrail-bench-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    print(f"data dir {data_dir}; collector on {base}", flush=True)
    with collector(data_dir, port) as process:
        watch = MemoryWatch(process.pid)
        elapsed, accepted = ingest(base, args.records, args.batch, args.workers)
        rate = accepted / elapsed
        print(
            f"ingest: {accepted:,} records in {elapsed:.1f} s = {rate:,.0f} records/s", flush=True
        )
        results = reads(base, accepted, args.samples)
        peak = watch.stop()
        print(f"collector peak RSS {peak:.0f} MiB", flush=True)
    explain = explain_search(data_dir)
    print(explain)
    if args.write_docs:
        write_docs(args, rate, elapsed, peak, results, explain)
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
