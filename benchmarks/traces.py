"""Traces, sessions and users benchmark: list and read latencies on the embedded store.

    .venv/bin/python benchmarks/traces.py --records 1000000 [--write-docs]
    .venv/bin/python benchmarks/traces.py --records 1000000 --data-dir DIR [--reuse]

Starts ``promptrail serve`` on a fresh data dir (or ``--data-dir``) and loads ``--records``
records through ``POST /v1/requests/batch``, shaped as issue 32 sizes them: traces of 10
records (a chain root, then model calls and tool runs), one trace per 10 records, one session
per 5 traces, one user per 10 sessions (10M records: 1M traces, 200k sessions, 20k users), spread over 30 days;
plus one trace of 500 records and one session of 50 turns. Then measures p50/p95 of the trace
list (newest, and by user), one trace of 500 records (a page of 100, and read whole), the
session list, one session of 50 turns, the user list, and the request log's first page.

With ``--data-dir DIR --reuse`` a store this command loaded before (it leaves ``loaded.json``
in DIR) is read again without loading it anew: the reads of two trees can then be compared,
alternated, on the same store (a tree whose migrations the store lacks applies them first).
The records' times are those of the load. ``--wait`` bounds the wait for a quiet machine
before the reads (120 s by default).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _harness import check, collector
from _report import Machine, cpu_probe_ms, latency_table, wait_quiet, write_section

KEY = "pr-bench-traces"
SECTION = "## Traces, sessions and users (`benchmarks/traces.py`)"
TRACE_SIZE = 10
TRACES_PER_SESSION = 5
SESSIONS_PER_USER = 10
BIG_TRACE = "b" * 32
BIG_SESSION = "session-of-50-turns"
END = datetime.now(UTC).replace(microsecond=0)
START = END - timedelta(days=30)
# Written into the data dir once a load has finished: what --reuse reads instead of loading.
LOADED = "loaded.json"


def trace_records(number: int, traces: int) -> Iterator[dict[str, Any]]:
    """The records of trace ``number`` of ``traces``: a chain root, model calls and tools."""
    session = number // TRACES_PER_SESSION
    meta = {"user_id": f"user-{session % max(1, traces // 50):05d}", "session_id": f"s-{session}"}
    trace_id = f"{number + 1:032x}"
    at = START + (END - START) * (number / traces)
    for i in range(TRACE_SIZE):
        record: dict[str, Any] = {
            "id": f"req_t{number}-{i}",
            "created_at": (at + timedelta(milliseconds=40 * i)).isoformat(),
            "trace_id": trace_id,
            "span_id": f"{i + 1:016x}",
            "span_name": "answer" if i == 0 else f"step-{i}",
            "metadata": meta,
            "output": {"content": f"output {number} {i}"},
        }
        if i == 0:
            record.update(kind="chain", latency_ms=40 * TRACE_SIZE)
        else:
            record["parent_span_id"] = f"{1:016x}"
            if i % 3 == 0:
                record["kind"] = "tool"
            else:
                record.update(
                    model="gpt-4o-mini",
                    usage={"prompt_tokens": 120, "completion_tokens": 30},
                    latency_ms=35,
                )
        yield record


def special_records() -> list[dict[str, Any]]:
    """One trace of 500 records and one session of 50 turns (a chain and a model call each)."""
    at = END - timedelta(hours=2)
    big = [
        {
            "id": f"req_big-{i:03d}",
            "created_at": (at + timedelta(milliseconds=10 * i)).isoformat(),
            "trace_id": BIG_TRACE,
            "span_id": f"{i + 1:016x}",
            "kind": "chain" if i == 0 else ("llm", "tool", "retriever")[i % 3],
            **({"parent_span_id": f"{1:016x}"} if i else {}),
        }
        for i in range(500)
    ]
    turns = []
    for turn in range(50):
        meta = {"user_id": "user-conversation", "session_id": BIG_SESSION}
        trace_id = f"{turn + 1:08x}" + "c" * 24
        when = at + timedelta(minutes=turn)
        turns += [
            {
                "id": f"req_turn-{turn:02d}-root",
                "created_at": when.isoformat(),
                "trace_id": trace_id,
                "span_id": f"{1:016x}",
                "kind": "chain",
                "metadata": meta,
            },
            {
                "id": f"req_turn-{turn:02d}-call",
                "created_at": (when + timedelta(milliseconds=5)).isoformat(),
                "trace_id": trace_id,
                "span_id": f"{2:016x}",
                "parent_span_id": f"{1:016x}",
                "model": "gpt-4o-mini",
                "input": [{"role": "user", "content": f"question {turn}"}],
                "output": {"content": f"answer {turn}"},
                "metadata": meta,
            },
        ]
    return big + turns


def ingest(base: str, records: int, workers: int) -> tuple[int, float]:
    """Load the records in gzip batches of 500 traces from ``workers`` threads."""
    traces = max(1, records // TRACE_SIZE)
    per_batch = 500
    batches = range(0, traces, per_batch)
    accepted = 0
    lock = threading.Lock()

    def send(first: int) -> None:
        nonlocal accepted
        rows = [
            r
            for n in range(first, min(traces, first + per_batch))
            for r in trace_records(n, traces)
        ]
        body = gzip.compress(json.dumps({"records": rows}).encode(), 1)
        with httpx.Client(base_url=base, headers=_auth(), timeout=300) as client:
            response = check(
                client.post(
                    "/v1/requests/batch",
                    content=body,
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                ),
                201,
            )
        with lock:
            accepted += int(response.json()["data"]["accepted"])

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(send, batches))
    with httpx.Client(base_url=base, headers=_auth(), timeout=300) as client:
        extra = special_records()
        check(client.post("/v1/requests/batch", json={"records": extra}), 201)
    return accepted + len(extra), time.monotonic() - started


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def measure(samples: int, call: Callable[[], Any]) -> tuple[float, float]:
    """p50 and p95 in ms of ``samples`` calls (after two warm-up calls)."""
    call()
    call()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.95))]


def reads(base: str, samples: int) -> list[dict[str, Any]]:
    """The latencies of each read, over one keep-alive connection."""
    results: list[dict[str, Any]] = []
    with httpx.Client(base_url=base, headers=_auth(), timeout=300) as client:

        def get(path: str, **params: Any) -> dict[str, Any]:
            body: dict[str, Any] = check(client.get(path, params=params)).json()
            return body

        def whole(path: str, limit: int, **params: Any) -> int:
            count, cursor = 0, None
            while True:
                body = get(path, limit=limit, **params, **({"cursor": cursor} if cursor else {}))
                count += len(body["data"]["items"])
                cursor = body["pagination"].get("next_cursor")
                if not cursor:
                    return count

        # A trace's page takes up to 1,000 records (what the SDK and the console ask); a
        # session's up to 100.
        assert whole(f"/v1/traces/{BIG_TRACE}", 1000) == 500
        assert whole(f"/v1/sessions/{BIG_SESSION}", 100) == 50
        user = get("/v1/traces")["data"][0]["user_id"]
        cases: list[tuple[str, Callable[[], Any]]] = [
            ("trace list, newest 20", lambda: get("/v1/traces")),
            ("trace list of one user", lambda: get("/v1/traces", user_id=user)),
            (
                "one trace of 500 records: its first page (100)",
                lambda: get(f"/v1/traces/{BIG_TRACE}", limit=100),
            ),
            (
                "one trace of 500 records, whole (pages of 100: 5)",
                lambda: whole(f"/v1/traces/{BIG_TRACE}", 100),
            ),
            (
                "one trace of 500 records, whole (pages of 1,000: 1)",
                lambda: whole(f"/v1/traces/{BIG_TRACE}", 1000),
            ),
            ("session list (30 days), newest 20", lambda: get("/v1/sessions")),
            ("one session of 50 turns", lambda: get(f"/v1/sessions/{BIG_SESSION}", limit=100)),
            ("user list (30 days), newest 20", lambda: get("/v1/users")),
            ("request log, first page (model calls)", lambda: get("/v1/requests")),
        ]
        for name, call in cases:
            p50, p95 = measure(samples, call)
            print(f"  {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms", flush=True)
            results.append({"operation": name, "p50": p50, "p95": p95, "samples": samples})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--data-dir", type=Path, help="the store's directory (default: a new one)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read the store --data-dir holds from an earlier load instead of loading",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=120,
        help="seconds to wait at most for a quiet machine before the reads (default 120)",
    )
    args = parser.parse_args()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="promptrail-bench-traces-"))
    marker = data_dir / LOADED
    loaded = json.loads(marker.read_text()) if args.reuse and marker.exists() else None
    if args.reuse and loaded is None:
        raise SystemExit(f"--reuse: {marker} not found (load the store first without --reuse)")
    if loaded is not None and loaded["records"] != args.records:
        raise SystemExit(f"--reuse: {data_dir} holds a load of {loaded['records']:,} records")
    began = time.monotonic()
    with collector(data_dir, KEY, PROMPTRAIL_MAX_BODY_BYTES=str(64 << 20)) as served:
        print(f"data dir {data_dir}; collector on {served.url}; load {load}", flush=True)
        if loaded is None:
            accepted, elapsed = ingest(served.url, args.records, args.workers)
            marker.write_text(
                json.dumps({"records": args.records, "accepted": accepted, "seconds": elapsed})
            )
            print(f"ingest: {accepted:,} records in {elapsed:.1f} s", flush=True)
        else:
            accepted, elapsed = int(loaded["accepted"]), float(loaded["seconds"])
            print(f"reusing a load of {accepted:,} records", flush=True)
        settled, _ = wait_quiet(max_seconds=args.wait)
        # The machine's speed drifts by the hour: each run says how fast it was (_report).
        print(
            f"reads begin; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}; "
            f"CPU probe {cpu_probe_ms():.0f} ms",
            flush=True,
        )
        results = reads(served.url, args.samples)
    print(f"whole run: {time.monotonic() - began:.0f} s")
    if args.write_docs:
        traces = args.records // TRACE_SIZE
        sessions = traces // TRACES_PER_SESSION
        lines = [
            SECTION,
            "",
            f"Command: `.venv/bin/python benchmarks/traces.py --records {args.records}`  ",
            f"Machine: {Machine.current().line()}  ",
            f"Date: {datetime.now(UTC):%Y-%m-%d}; embedded store (chDB), collector in its own "
            f"process; load average before the run: {load}; reads began {settled:.0f} s after "
            f"the ingest (waiting at most {args.wait:.0f} s for the CPUs to go quiet).",
            "",
            f"- Data: {accepted:,} records in {traces:,} traces of {TRACE_SIZE}, "
            f"{sessions:,} sessions, {max(1, sessions // SESSIONS_PER_USER):,} users over 30 "
            f"days, plus one trace of 500 records and one session of 50 turns; loaded in "
            f"{elapsed:.0f} s.",
            "",
            *latency_table(results),
            "",
        ]
        write_section("\n".join(lines))


if __name__ == "__main__":
    main()
