"""Backup and restore benchmark: how long `promptrail backup` and `restore` take, and how big.

    .venv/bin/python benchmarks/backups.py --records 200000 [--write-docs]

Loads records into a fresh embedded store through ``POST /v1/requests/batch`` (the request-log
benchmark's synthetic records), then times, as a user runs them: a backup through the running
collector while a client keeps reading, a backup with the collector stopped, and a restore into
a new data dir; and the sizes of the store and of the backup. Each time is the whole command,
from start to exit (the CLI's own start-up included).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from _harness import collector
from _report import Machine, write_section
from request_log import KEY, ingest

CLI = Path(sys.executable).parent / "promptrail"
SECTION = "## Backups (`benchmarks/backups.py`)"


def size_mib(path: Path) -> float:
    """Return the bytes of the files under ``path``, in MiB."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / (1 << 20)


def timed(*args: str) -> float:
    """Run ``promptrail`` with ``args``; return its wall time in seconds (it must succeed)."""
    began = time.perf_counter()
    done = subprocess.run([str(CLI), *args], capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"promptrail {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed


class Reader:
    """Read the request list over and over while a backup runs; keep each latency."""

    def __init__(self, base: str) -> None:
        self._base = base
        self._stop = threading.Event()
        self.latencies: list[float] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=self._base, headers=headers, timeout=60) as client:
            while not self._stop.is_set():
                began = time.perf_counter()
                client.get("/v1/requests?limit=20").raise_for_status()
                self.latencies.append((time.perf_counter() - began) * 1000)

    def stop(self) -> list[float]:
        """Stop reading; return the latencies in ms."""
        self._stop.set()
        self._thread.join()
        return self.latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    work = Path(tempfile.mkdtemp(prefix="promptrail-bench-backup-"))
    source = work / "source"
    body_limit = {"PROMPTRAIL_MAX_BODY_BYTES": str(64 << 20)}
    with collector(source, KEY, **body_limit) as served:
        result = ingest(served.url, args.records, 5000, 3, served.process.pid)
        print(f"ingested {result.accepted:,} records in {result.elapsed:.0f} s", flush=True)
        reader = Reader(served.url)
        online = timed("backup", str(work / "online"), "--data-dir", str(source))
        latencies = reader.stop()
    offline = timed("backup", str(work / "offline"), "--data-dir", str(source))
    restore = timed("restore", str(work / "offline"), "--data-dir", str(work / "target"))
    store, backup = size_mib(source / "clickhouse"), size_mib(work / "offline")
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) >= 20 else max(latencies)
    lines = [
        SECTION,
        "",
        f"Command: `.venv/bin/python benchmarks/backups.py --records {args.records}`  ",
        f"Machine: {Machine.current().line()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d}; embedded store (chDB); load average before the "
        f"run: {load}. Each time is the whole `promptrail` command, start-up included.",
        "",
        "| what | figure |",
        "|---|---:|",
        f"| records | {result.accepted:,} |",
        f"| store on disk (`<data dir>/clickhouse`) | {store:.0f} MiB |",
        f"| backup on disk | {backup:.0f} MiB |",
        f"| `promptrail backup`, through the running collector | {online:.1f} s |",
        f"| `promptrail backup`, collector stopped | {offline:.1f} s |",
        f"| `promptrail restore` into a new data dir | {restore:.1f} s |",
        f"| list reads during the online backup: p50 / p95 | {p50:.0f} / {p95:.0f} ms "
        f"({len(latencies)} reads) |",
        "",
    ]
    print("\n".join(lines))
    if args.write_docs:
        write_section("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
