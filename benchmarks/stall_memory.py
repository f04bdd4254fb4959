"""Memory while clients keep posting into a stalled store (issue 25, point 3).

    .venv/bin/python benchmarks/stall_memory.py [--seconds 20] [--clients 12] [--buffer-mib 8]

Starts ``promptrail serve`` (embedded store, fault injection on), posts 1 MiB batches from
several client threads as fast as the collector answers, and stalls the store in the middle:
first every insert waits 10 s (``slow``, ClickHouse's insert throttling), then every insert fails
(``fail``, TOO_MANY_PARTS). It prints the collector's RSS before and during each stall, what the
clients got, and, after the store is back, whether every acknowledged record is stored once
(sum of ``total_tokens``, one per record, by the analytics API).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from _harness import Collector, collector, resume_store, stall_store
from request_log import MemoryWatch

KEY = "pr-bench-stall"
RECORDS_PER_BATCH = 500


def batch(client: int, serial: int) -> bytes:
    records = [
        {
            "id": f"req_c{client}_b{serial}_r{i}",
            "created_at": "2026-11-25T12:00:00Z",
            "model": "gpt-4o-mini",
            "output": "lorem ipsum " * 170,
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
        }
        for i in range(RECORDS_PER_BATCH)
    ]
    return json.dumps({"records": records}).encode()


class Clients:
    """Threads posting batches until stopped; they count answers and acknowledged records."""

    def __init__(self, url: str, count: int) -> None:
        self.answers: Counter[str] = Counter()
        self.acknowledged = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(url, n), daemon=True) for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, url: str, client: int) -> None:
        headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
        serial = 0
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            while not self._stop.is_set():
                response = http.post("/v1/requests/batch", content=batch(client, serial))
                code = str(response.status_code)
                if response.status_code == 503:
                    code += " " + response.json()["error"]["code"]
                    # A client that honours Retry-After would wait; this one keeps posting.
                with self._lock:
                    self.answers[code] += 1
                    if response.status_code == 201:
                        self.acknowledged += response.json()["data"]["accepted"]
                        serial += 1

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def phase(name: str, running: Collector, clients: Clients, seconds: float) -> None:
    watch = MemoryWatch(running.process.pid)
    before = clients.answers.copy()
    time.sleep(seconds)
    peak = watch.stop()
    answers = dict(clients.answers - before)
    print(f"{name:<22} peak RSS {peak:6.0f} MiB  answers {answers}")


def stored(url: str) -> int:
    response = httpx.get(
        f"{url}/v1/requests/analytics",
        params={"metric": "usage", "start_date": "2026-11-01T00:00:00Z"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=120,
    )
    response.raise_for_status()
    return int(response.json()["data"]["total"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--buffer-mib", type=int, default=8, help="PROMPTRAIL_INGEST_BUFFER_BYTES")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        buffer = str(args.buffer_mib << 20)
        with collector(
            data_dir, KEY, PROMPTRAIL_FAULT_INJECTION="1", PROMPTRAIL_INGEST_BUFFER_BYTES=buffer
        ) as running:
            clients = Clients(running.url, args.clients)
            phase("store working", running, clients, args.seconds)
            stall_store(running, data_dir, "slow", seconds=10)
            phase("inserts wait 10 s", running, clients, args.seconds)
            stall_store(running, data_dir, "fail")
            phase("inserts fail", running, clients, args.seconds)
            resume_store(running, data_dir)
            phase("store back", running, clients, args.seconds)
            clients.stop()
            count = stored(running.url)
            print(f"acknowledged {clients.acknowledged} records, stored {count}")


if __name__ == "__main__":
    main()
