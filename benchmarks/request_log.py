"""Request-log benchmark: ingest and read latencies at scale on the embedded store.

    .venv/bin/python benchmarks/request_log.py --records 1000000 [--write-docs]
    .venv/bin/python benchmarks/request_log.py --records 10000000 --write-docs

Starts ``promptrail serve`` on a fresh data dir, loads synthetic but realistic records
(varied prompts, models, metadata; outputs of 200-2,000 characters) through
``POST /v1/requests/batch`` from a few client threads, then measures p50/p95 of list
(unfiltered, by prompt, by metadata), detail, search and each analytics metric over one
keep-alive connection, samples the collector's memory throughout, and finally shows with
``EXPLAIN indexes = 1`` that search is served by the text (inverted) index.

    .venv/bin/python benchmarks/request_log.py --records 200000 --batch 2000 --workers 4 \
        --raw --reads-now --only "list by metadata"

``--raw`` inserts the same records, as the collector stores them, straight into a fresh
embedded chDB table with the log's DDL (``requests`` alone: no views, no HTTP, no Python work
timed), in a process of its own, as a plain client writes: one thread, 5,000-row JSONEachRow
blocks (``--raw-threads``, ``--raw-batch``; issue 52). It runs just before the collector starts
and again once it has stopped, and prints both rates and the ratio to their mean, so that a
change of the shared machine's load during the run shows instead of skewing the ratio.
``--reads-now`` measures the reads right after the ingest, as the issue did, without waiting
for the rollup's sealing or a quiet machine.

    .venv/bin/python benchmarks/request_log.py --records 50000 --chat-versions 0,1000,0,1000

``--chat-versions`` measures the linking of records that name no prompt (issue 48): for each
count, on a fresh collector, it creates that many chat versions in the project (prompts of
five versions each), then ingests records that name no prompt and carry chat messages: half
rendered from one of 1,000 such versions, a quarter differing from one in a single character,
a quarter unrelated. The same records every run; only the registry differs, so the rates
compare the ingest with and without the versions to match against (no reads measured).
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _harness import collector
from _report import (
    DOCS,
    Machine,
    cpu_probe_ms,
    latency_table,
    random_words,
    wait_quiet,
    write_section,
)

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "promptrail"
KEY = "pr-bench-request-log"
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


def text(rng: random.Random, low: int, high: int) -> str:
    size = rng.randint(low, high)
    return " ".join(random_words(rng, WORDS, size))[:size]


# Record bodies the load varies from; with 5,000 possible users, ~1,650 of them occur.
POOL_SIZE = 2000


def make_pool(
    rng: random.Random, size: int = POOL_SIZE, client_cost: bool = True
) -> list[dict[str, Any]]:
    """Record bodies to vary from: building 10M distinct texts would dominate the run.

    ``client_cost=False`` leaves the cost out, so that the collector prices every record.
    """
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
                }
                if client_cost
                else {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
                "latency_ms": rng.randint(150, 9000),
            }
        )
    return pool


def record_id(number: int, ids: str = "bench") -> str:
    """The id of the benchmark's record ``number``, by ``ids``:

    - ``bench``: ``req_bench<number>``, in the records' time order (as the collector's own
      ids, ``req_<ms><random>``, are);
    - ``sdk``: as the SDK makes them, ``req_<trace id><span id>`` with a trace id that leads
      with its start in ms (``promptrail._capture.spans.new_trace_id``): in time order, random below;
    - ``random``: ``req_<32 hex><16 hex>`` all random, as from another OpenTelemetry SDK's
      ids (a provider without promptrail's id generator): in no order.

    The same number always gives the same id.
    """
    if ids == "bench":
        return f"req_bench{number:010d}"
    digest = int.from_bytes(
        hashlib.blake2b(number.to_bytes(8, "little"), digest_size=24).digest(), "big"
    )
    if ids == "sdk":  # 30 days over a million records, as the bodies spread them
        start_ms = 1_790_000_000_000 + number * 2_592
        digest = (start_ms << 80 | digest >> 112) << 64 | digest & (1 << 64) - 1
    return f"req_{digest:048x}"


class Bodies:
    """Batch bodies: gzip ones made from pre-compressed record templates, cheaply and on
    demand; or zstd ones (``coding``), each compressed whole as the SDK compresses its posts.

    Compressing each batch would cost the client more CPU than the collector spends on it.
    Each record is its variable head (id, created_at) followed by one of a few thousand
    constant tails. A tail is compressed once, as an independent deflate segment (full
    flush: byte-aligned, no back references); a head goes in as a stored (uncompressed)
    block. A body is those segments concatenated between a gzip header and trailer, so
    making one is joins and a CRC, and only one batch per client thread is ever in memory.
    A zstd body is one frame of the whole batch (zstd level 3, as the SDK's shipper writes it:
    about gzip level 1's size): up to ``PRECOMPRESSED`` records they are all compressed before
    the clock starts (~320 bytes a record held), past it each as it is sent (~3 µs of the
    client's CPU a record).
    """

    PRECOMPRESSED = 2_000_000

    def __init__(
        self,
        total: int,
        size: int,
        pool: list[dict[str, Any]],
        start: datetime,
        ids: str = "bench",
        coding: str = "gzip",
    ):
        self.total = total
        self.ids = ids
        self.size = size
        self.pool = pool
        span = 30 * 86_400_000
        self.first_ms = int(start.timestamp() * 1000) - span
        self.step_ms = span / max(total, 1)
        self.count = (total + size - 1) // size
        self._tails: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        self._days: dict[int, bytes] = {}
        self.coding = coding
        self._ready: dict[int, bytes] = {}

    def body(self, number: int) -> bytes:
        """The body of batch ``number``, in the bodies' coding; records spread evenly over
        30 days."""
        if self.coding == "gzip":
            return self._gzip_body(number)
        ready = self._ready.get(number)
        if ready is not None:
            return ready
        import zstandard

        plain, _ = self._records(number)
        return zstandard.ZstdCompressor(level=3).compress(b"".join(plain))

    def _gzip_body(self, number: int) -> bytes:
        plain, packed = self._records(number)
        return b"".join(
            (
                b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",  # gzip header, no name
                *packed,
                b"\x03\x00",  # an empty final block
                struct.pack("<II", zlib.crc32(b"".join(plain)), sum(map(len, plain)) & 0xFFFFFFFF),
            )
        )

    def _records(self, number: int) -> tuple[list[bytes], list[bytes]]:
        """Batch ``number``'s body as pieces of JSON text, and as the same pieces packed as
        deflate segments (stored or pre-compressed)."""
        rng = random.Random(number)
        plain: list[bytes] = []
        packed: list[bytes] = []
        first = number * self.size
        for i in range(first, min(first + self.size, self.total)):
            head = b'%s{"id":"%s","created_at":"%s",' % (
                b"," if i > first else b"",
                record_id(i, self.ids).encode(),
                self._time(int(self.first_ms + i * self.step_ms)),
            )
            tail, packed_tail = self._tail(i, rng.getrandbits(2))
            plain += (head, tail)
            packed += (_stored(head), packed_tail)
        opening, closing = b'{"records":[', b"]}"
        return [opening, *plain, closing], [_stored(opening), *packed, _stored(closing)]

    def prepare(self) -> None:
        """Compress every constant tail up front, before the clock starts (and the zstd
        bodies, up to ``PRECOMPRESSED`` records)."""
        for index in range(min(len(self.pool), self.total)):
            for feature in range(3):
                self._tails[(index, feature)] = _pack(self._tail_text(index, feature))
        if self.coding == "zstd" and self.total <= self.PRECOMPRESSED:
            for number in range(self.count):
                self._ready[number] = self.body(number)

    def _time(self, millis: int) -> bytes:
        """ISO 8601 text of a Unix time in ms (datetime.isoformat costs more per record)."""
        day, rest = divmod(millis, 86_400_000)
        date = self._days.get(day)
        if date is None:
            date = self._days[day] = (
                datetime.fromtimestamp(day * 86_400, UTC).date().isoformat().encode()
            )
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        seconds, millis = divmod(rest, 1000)
        return b"%sT%02d:%02d:%02d.%03dZ" % (date, hours, minutes, seconds, millis)

    def _tail(self, i: int, draw: int) -> tuple[bytes, bytes]:
        # Half the records carry one more metadata key: draw is 2 bits of the batch's rng.
        key = (i % len(self.pool), draw - 1 if draw >= 2 else 0)
        if i % 10_000 == 0:
            return _pack(self._tail_text(*key, rare=True))
        if key not in self._tails:
            self._tails[key] = _pack(self._tail_text(*key))
        return self._tails[key]

    def _tail_text(self, index: int, feature: int, rare: bool = False) -> bytes:
        body = dict(self.pool[index])
        if rare:
            body["output"] = f"{body['output'][:100]} {RARE} {body['output'][100:]}"
        if feature:
            body["metadata"] = {**body["metadata"], "feature": ("chat", "search")[feature - 1]}
        return json.dumps(body).encode()[1:]  # the object without its opening brace


def _pack(tail: bytes) -> tuple[bytes, bytes]:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return tail, compressor.compress(tail) + compressor.flush(zlib.Z_FULL_FLUSH)


def _stored(data: bytes) -> bytes:
    """A non-final stored deflate block (the stream is byte-aligned after a full flush)."""
    return b"\x00" + struct.pack("<HH", len(data), len(data) ^ 0xFFFF) + data


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the collector), in MiB."""
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total += int(line.split()[1])
    return total / 1024


class MemoryWatch:
    """Samples a process's RSS every half second in a thread."""

    INTERVAL = 0.5

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        # (seconds since the watch began, RSS in MiB), for rss-ingest.csv in the data dir.
        self.samples: list[tuple[float, float]] = []
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            try:
                rss = rss_mb(self.pid)
            except OSError:
                return
            self.peak = max(self.peak, rss)
            self.samples.append((time.monotonic() - self._began, rss))

    def seconds_above(self, mib: float) -> float:
        """Time the RSS spent above ``mib`` so far (by the half-second samples)."""
        return self.INTERVAL * sum(1 for _, rss in self.samples if rss > mib)

    def write(self, path: Path) -> None:
        path.write_text("".join(f"{t:.1f},{rss:.0f}\n" for t, rss in self.samples))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


@dataclass
class IngestResult:
    elapsed: float
    accepted: int
    client_cpu: float
    collector_cpu: float


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ingest(
    base: str,
    total: int,
    size: int,
    workers: int,
    collector_pid: int,
    client_cost: bool = True,
    ids: str = "bench",
    pool: list[dict[str, Any]] | None = None,
    coding: str = "gzip",
) -> IngestResult:
    pool = pool or make_pool(random.Random(1), client_cost=client_cost)
    bodies = Bodies(total, size, pool, datetime.now(UTC), ids, coding)
    bodies.prepare()
    numbers = iter(range(bodies.count))
    lock = threading.Lock()
    accepted = 0
    headers = {
        "Authorization": f"Bearer {KEY}",
        "Content-Encoding": coding,
        "Content-Type": "application/json",
    }

    def worker() -> None:
        nonlocal accepted
        with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
            while True:
                with lock:
                    number = next(numbers, None)
                if number is None:
                    return
                response = client.post("/v1/requests/batch", content=bodies.body(number))
                while response.status_code == 503:
                    # The store is behind (docs/deploy.md, "When the store stalls"): come back
                    # when the collector says, as the SDK does; the batch was not stored.
                    time.sleep(float(response.headers.get("retry-after", "1")))
                    response = client.post("/v1/requests/batch", content=bodies.body(number))
                response.raise_for_status()
                with lock:
                    accepted += response.json()["data"]["accepted"]
                    if accepted % 100_000 < size:
                        print(f"  ingested {accepted:,}/{total:,}", flush=True)

    client_began, collector_began = time.process_time(), cpu_seconds(collector_pid)
    began = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool_:
        for future in [pool_.submit(worker) for _ in range(workers)]:
            future.result()
    # Timed until stored: with the request-log journal the answers come before the inserts,
    # and a read waits for every record answered before it.
    httpx.get(f"{base}/v1/requests", params={"limit": 1}, headers=headers, timeout=300)
    return IngestResult(
        elapsed=time.perf_counter() - began,
        accepted=accepted,
        client_cpu=time.process_time() - client_began,
        collector_cpu=cpu_seconds(collector_pid) - collector_began,
    )


@dataclass
class RawResult:
    """The raw insert: records, seconds spent in the inserts, CPU of the process meanwhile."""

    records: int
    seconds: float
    cpu: float


def _scratch_dir(prefix: str) -> Path:
    """A fresh data directory, removed when the benchmark exits (a 200k-record store is
    ~700 MiB; left behind by each run, they filled the disk). ``--data-dir`` is kept."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def raw_insert(total: int, size: int, scratch: Path, threads: int) -> RawResult:
    """Insert ``total`` records, in batches of ``size`` from ``threads`` threads, into a fresh
    chDB table.

    The table is the log's (``requests``, its DDL as the collector makes it on the embedded
    store, its small parts packed since migration 52) alone; the rows
    are the benchmark's records as the collector stores them (validated, normalised and
    encoded as JSONEachRow by the collector's own functions), all made before the clock
    starts: only the inserts are timed, each thread on a client of its own (a chDB client
    runs one call at a time), and only the CPU of the process meanwhile counted.
    """
    from pydantic import TypeAdapter

    from promptrail.collector.models.requests import ValidRequestBatch
    from promptrail.collector.services.dates import utc_now_ms
    from promptrail.collector.services.ingest import record_values
    from promptrail.collector.store.connection import close_client, open_client
    from promptrail.collector.store.request_rows import JSON_INPUT, encode_rows
    from promptrail.collector.store.request_tables import COLUMNS, PACKED_PARTS, REQUESTS
    from promptrail.collector.store.schema import EmbeddedSetting, render, render_database

    batches = TypeAdapter(ValidRequestBatch)
    bodies = Bodies(total, size, make_pool(random.Random(1)), datetime.now(UTC))
    bodies.prepare()
    encoded = []
    for number in range(bodies.count):
        records = batches.validate_json(zlib.decompress(bodies.body(number), 31)).records
        encoded.append(encode_rows("default", [record_values(r, utc_now_ms()) for r in records]))
    clients = [open_client(f"chdb://{scratch}") for _ in range(threads)]
    try:
        clients[0].command(render_database("raw", None))
        # As the collector's embedded store has it: its small parts packed (migration 52).
        for obj in (REQUESTS, EmbeddedSetting(REQUESTS, PACKED_PARTS)):
            for statement in render(obj, "raw", None):
                clients[0].command(statement)
        pending = iter(encoded)
        lock = threading.Lock()

        def insert(client: Any) -> None:
            while True:
                with lock:
                    batch = next(pending, None)
                if batch is None:
                    return
                client.raw_insert(
                    "raw.requests", COLUMNS, batch, settings=JSON_INPUT, fmt="JSONEachRow"
                )

        cpu_began, began = cpu_seconds(os.getpid()), time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(insert, client) for client in clients]:
                future.result()
        seconds = time.perf_counter() - began
        cpu = cpu_seconds(os.getpid()) - cpu_began
    finally:
        for client in clients:
            close_client(client)
    return RawResult(records=total, seconds=seconds, cpu=cpu)


def raw_in_process(total: int, size: int, threads: int) -> RawResult:
    """Run :func:`raw_insert` in a process of its own (chDB runs one engine per process)."""
    with tempfile.TemporaryDirectory(prefix="promptrail-raw-") as scratch:
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--raw-worker",
                scratch,
                "--records",
                str(total),
                "--batch",
                str(size),
                "--workers",
                str(threads),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    return RawResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def raw_summary(before: RawResult, after: RawResult, result: IngestResult) -> str:
    """The raw inserts (before and after) beside the collector's ingest: rates, the ratio to
    their mean, CPU per record."""
    rates = [raw.records / raw.seconds for raw in (before, after)]
    cpu = (before.cpu + after.cpu) / (before.records + after.records) * 1e6
    raw_rate, rate = sum(rates) / 2, result.accepted / result.elapsed
    return (
        f"raw chDB insert {rates[0]:,.0f} / {rates[1]:,.0f} records/s before / after "
        f"({cpu:.0f} µs CPU per record), collector {rate:,.0f} records/s "
        f"({result.collector_cpu / result.accepted * 1e6:.0f} µs CPU per record): "
        f"ratio {rate / raw_rate:.3f} (to the mean; {rate / max(rates):.3f} to the faster)"
    )


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
        "max": times[-1],
        "samples": samples,
    }
    print(
        f"  {label:<38} p50 {result['p50']:8.1f} ms   p95 {result['p95']:8.1f} ms   "
        f"max {result['max']:8.1f} ms",
        flush=True,
    )
    return result


def reads(base: str, total: int, samples: int, only: str | None = None) -> list[dict[str, Any]]:
    rng = random.Random(3)
    # Users that have records: a user drawn from all 5,000 has none two times out of three,
    # and an empty page says nothing about reading a user's records.
    users = sorted({body["metadata"]["user_id"] for body in make_pool(random.Random(1))})
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
                lambda i: ("/v1/requests", {"metadata.user_id": rng.choice(users)}),
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
            if only is None or any(part in label for part in only.split(",")):
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


# The collector's defaults: a bucket is sealed once untouched for this long; the sealer looks
# for such buckets this often.
ROLLUP_SETTLE = timedelta(seconds=60)
ROLLUP_INTERVAL = timedelta(seconds=30)
_SEALED_LINE = re.compile(
    r"^(\S+ \S+) INFO promptrail\.rollup: rollup: sealed (\d+) bucket\(s\) in (\S+) s"
)


def wait_sealed(log: Path, since: datetime) -> str:
    """Wait for the collector's sealer to sum every bucket written up to ``since``; describe it.

    Those buckets were last touched at ``since`` at the latest: the sealer takes them in its
    first round after the settle time, and a second interval lets that round finish.
    """
    remaining = since + ROLLUP_SETTLE + 2 * ROLLUP_INTERVAL - datetime.now()
    time.sleep(max(0.0, remaining.total_seconds()))
    rounds = [m for m in map(_SEALED_LINE.match, log.read_text().splitlines()) if m]
    if not rounds:
        return "every hour and day was sealed before this collector started"
    buckets = sum(int(m.group(2)) for m in rounds)
    seconds = sum(float(m.group(3)) for m in rounds)
    return f"{buckets} hours and days sealed in {seconds:.1f} s, in {len(rounds)} rounds"


def ingest_summary(args: argparse.Namespace, result: IngestResult) -> str:
    rate = result.accepted / result.elapsed
    return (
        f"{result.accepted:,} records in {result.elapsed:.1f} s = **{rate:,.0f} records/s** "
        f"(batches of {args.batch}, {args.coding}, {args.workers} client threads "
        "on the same 2 cores; "
        f"CPU used meanwhile: collector {result.collector_cpu:.1f} s, "
        f"benchmark client {result.client_cpu:.1f} s)"
    )


def write_docs(
    args: argparse.Namespace,
    result: IngestResult,
    load: str,
    peak: float,
    above: float | None,
    results: list[dict[str, Any]],
    explain: str,
    settled: float,
    sealing: str,
) -> None:
    lines = [
        SECTION,
        "",
        f"Command: `.venv/bin/python benchmarks/request_log.py --records {args.records}`"
        + (
            " (loaded once; reads measured by a second run with `--reuse` on the same store)"
            if args.reuse
            else ""
        )
        + "  ",
        f"Machine: {Machine.current().line()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d}; embedded store (chDB), collector in its own process; "
        f"load average before the run: {load}.",
        "",
        f"- Ingest: {ingest_summary(args, result)}.",
        f"- Collector memory (RSS) peak during the whole run: **{peak:.0f} MiB**"
        + (
            f"; above 1 GiB for {above:.0f} s of the {result.elapsed:.0f} s ingest"
            " (samples every 0.5 s in `rss-ingest.csv` of the data dir)."
            if above is not None
            else "."
        ),
        f"- Reads were measured once the machine was quiet (CPUs under 15% busy over 5 s), "
        f"{settled:.0f} s after the ingest ended or the collector started, and once the "
        f"analytics rollup had sealed every hour written ({sealing}).",
        "",
        *latency_table(results),
        "",
        "Search is served by the text index (`EXPLAIN indexes = 1` of the search query, rare word):",
        "",
        "```",
        explain,
        "```",
        "",
    ]
    write_section("\n".join(lines))


# Chat prompts the linking benchmark's records are drawn from: this many prompts of 5 versions.
CHAT_PROMPTS = 200
CHAT_VERSIONS_EACH = 5
# Seconds given to the store's merges of the version writes before an ingest is timed.
SETTLE_SECONDS = 10.0
LINKING_SECTION = "## Chat prompt linking (`benchmarks/request_log.py --chat-versions`)"


def chat_template(prompt: int, version: int) -> list[dict[str, Any]]:
    """The messages of a chat prompt's version: a system text of its own and a question,
    with a conversation's history between them for every third prompt."""
    system = (
        f"You are assistant {prompt:03d} of the {WORDS[prompt % len(WORDS)]} desk, revision "
        f"{version}. Answer in {{{{lang}}}}.{{{{#vip}}}} The user is a VIP.{{{{/vip}}}} "
        "Keep answers under {{limit}} words."
    )
    history = [{"type": "placeholder", "name": "history"}] if prompt % 3 == 0 else []
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": "{{q}}"}]


def chat_pool(rng: random.Random) -> list[dict[str, Any]]:
    """The default pool's records with no prompt name and chat messages as their input: half
    rendered from one of the chat versions, a quarter one character off, a quarter unrelated."""
    pool = make_pool(rng)
    for body in pool:
        del body["prompt_name"], body["version"], body["input_variables"]
        prompt, version = rng.randrange(CHAT_PROMPTS), rng.randint(1, CHAT_VERSIONS_EACH)
        lang, question = rng.choice(["English", "French"]), text(rng, 20, 200)
        system = (
            f"You are assistant {prompt:03d} of the {WORDS[prompt % len(WORDS)]} desk, "
            f"revision {version}. Answer in {lang}. Keep answers under {rng.randint(20, 90)} "
            "words."
        )
        draw = rng.random()
        if draw >= 0.75:
            system = f"Summarise the ticket for the {rng.choice(WORDS)} team in {lang}."
        elif draw >= 0.5:
            system = system.removesuffix(".") + "!"  # the literal text differs: no match
        history = (
            [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]
            if prompt % 3 == 0
            else []
        )
        body["input"] = [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": question},
        ]
    return pool


def create_chat_versions(base: str, count: int) -> None:
    """Create ``count`` chat versions: prompts of CHAT_VERSIONS_EACH versions (PATCHes)."""
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        for made in range(count):
            prompt, version = divmod(made, CHAT_VERSIONS_EACH)
            messages = chat_template(prompt, version + 1)
            if version == 0:
                response = client.post(
                    "/v1/prompts",
                    json={
                        "name": f"chat-{prompt:04d}",
                        "type": "chat",
                        "messages": messages,
                        "model": "gpt-4o",
                    },
                )
            else:
                response = client.patch(
                    f"/v1/prompts/chat-{prompt:04d}", json={"messages": messages}
                )
            response.raise_for_status()


def warm_up(base: str, body: dict[str, Any]) -> float:
    """Log one record like the run's, so the collector reads (and compiles) the project's chat
    versions before the clock starts, then let the store's merges of the writes settle: the
    rates compare steady ingest, and the one read is given apart (docs/benchmarks.md)."""
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        began = time.perf_counter()
        response = client.post("/v1/requests", json={**body, "id": "req_warm_up"})
        response.raise_for_status()
        first_ms = (time.perf_counter() - began) * 1000
    time.sleep(SETTLE_SECONDS)
    return first_ms


def linked_count(base: str) -> int:
    """How many stored records the collector linked (``metadata.prompt_link = matched``)."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as client:
        response = client.get(
            "/v1/requests/analytics",
            params={"metric": "usage", "group_by": "version", "metadata.prompt_link": "matched"},
        )
        response.raise_for_status()
        return sum(int(group["count"]) for group in response.json()["data"]["groups"])


def process_cpu() -> float:
    """CPU seconds of this process so far, every thread's (chDB's included)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def encoded_blocks(
    count: int, rows: int, traced: bool = False, inputs: bool = False
) -> list[bytes]:
    """The benchmark's first ``count`` records in blocks of ``rows``, encoded for the log's
    insert as the collector encodes them (``traced``: in traces of 10, as
    ``benchmarks/traces.py`` makes them, each with its session and user; ``inputs``: each
    with the chat messages of its call as its input, as the SDK's captures carry them)."""
    from pydantic import TypeAdapter

    from promptrail.collector.models.requests import ValidRequestBatch
    from promptrail.collector.services.dates import utc_now_ms
    from promptrail.collector.services.ingest import record_values
    from promptrail.collector.store.request_rows import encode_rows

    batches = TypeAdapter(ValidRequestBatch)
    bodies = Bodies(count, rows, make_pool(random.Random(1)), datetime.now(UTC))
    bodies.prepare()
    made = []
    for number in range(bodies.count):
        body = json.loads(zlib.decompress(bodies.body(number), 31))
        for i, record in enumerate(body["records"] if traced else []):
            at = number * rows + i
            record.update(trace_id=f"{at // 10 + 1:032x}", span_id=f"{at % 10 + 1:016x}")
            if at % 10:
                record["parent_span_id"] = f"{1:016x}"
        for record in body["records"] if inputs else []:
            record["input"] = [
                {"role": "system", "content": "You answer support questions. " * 8},
                {"role": "user", "content": record["input_variables"]["question"] * 3},
            ]
        records = batches.validate_python(body).records
        made.append(encode_rows("default", [record_values(r, utc_now_ms()) for r in records]))
    return made


def view_costs(total: int, size: int, rounds: int, traced: bool) -> None:
    """Print the CPU one insert into the log costs with every view, and without each view of
    the log's insert path in turn (issue 52.1): the view's cost is the difference.

    A fresh embedded store in this process, migrated as the collector migrates it, merges
    stopped (so only the inserts count); the benchmark's records, encoded as the collector
    encodes them (``traced``: in traces of 10, as ``benchmarks/traces.py`` makes them, each
    with its session and user). Per round and case: the median CPU of 15 one-row inserts and
    of 2 inserts of ``size`` rows, the process's CPU (chDB's threads included); cases are
    alternated within each round so that a change of the machine's speed hits them alike.
    """
    from promptrail.collector.store.connection import close_client, open_client
    from promptrail.collector.store.migrations import migrate
    from promptrail.collector.store.requests import RequestStore

    cpu = process_cpu

    ones = encoded_blocks(rounds * 200, 1, traced)
    blocks = encoded_blocks(max(total, size * 4), size, traced)
    with tempfile.TemporaryDirectory(prefix="promptrail-views-") as scratch:
        client = open_client(f"chdb://{scratch}")
        try:
            migrate(client, "views")
            client.command("SYSTEM STOP MERGES")
            store = RequestStore(client, "views")
            made = {
                str(name): str(ddl)
                for name, ddl in client.query(
                    "SELECT name, create_table_query FROM system.tables WHERE database = 'views' "
                    "AND engine = 'MaterializedView' AND match(create_table_query, "
                    "'FROM views[.](requests|request_items)([^a-z_]|$)')"
                ).result_rows
            }
            cases = ["every view", *(f"without {name}" for name in sorted(made))]
            timings: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
            one, block = iter(ones * 4), iter(blocks * (rounds * len(cases)))
            for round_ in range(rounds):
                for case in cases:
                    dropped = case.removeprefix("without ") if case != "every view" else None
                    if dropped:
                        client.command(f"DROP VIEW views.`{dropped}`")
                    single = []
                    for _ in range(15):
                        began = cpu()
                        store.insert([next(one)])
                        single.append(cpu() - began)
                    whole = []
                    for _ in range(2):
                        began = cpu()
                        store.insert([next(block)])
                        whole.append(cpu() - began)
                    if dropped:
                        client.command(made[dropped])
                    timings[case].append(
                        (statistics.median(single) * 1e3, statistics.median(whole) * 1e3)
                    )
                print(f"  round {round_ + 1} of {rounds} done", flush=True)
        finally:
            close_client(client)
    base = timings["every view"]
    print(f"insert CPU, ms: one row / {size:,} rows (median over {rounds} rounds)")
    for case in cases:
        one_ms = statistics.median(t[0] for t in timings[case])
        block_ms = statistics.median(t[1] for t in timings[case])
        line = f"  {case:<36} {one_ms:7.1f} / {block_ms:8.1f}"
        if case != "every view":
            saved = [(b[0] - t[0], b[1] - t[1]) for b, t in zip(base, timings[case], strict=True)]
            line += (
                f"   view: {statistics.median(s[0] for s in saved):6.1f} / "
                f"{statistics.median(s[1] for s in saved):7.1f}"
            )
        print(line, flush=True)
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


# The text index's variants --index-costs compares (issue 52.1): what each changes of a fresh
# migrated store (statements run on it, {db} its database), and the settings of its inserts.
_TEXT_INDEX = "INDEX idx_search search_text TYPE text(tokenizer = splitByNonAlpha{})"
INDEX_VARIANTS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "index built by the insert": ((), {}),
    "index left to the merge": ((), {"exclude_materialize_skip_indexes_on_insert": "idx_search"}),
    "v1_with_codec": (
        (
            "ALTER TABLE {db}.requests MODIFY SETTING "
            "text_index_serialization_version = 'v1_with_codec'",
        ),
        {},
    ),
    "postings bitpacked": (
        (
            "ALTER TABLE {db}.requests DROP INDEX idx_search",
            "ALTER TABLE {db}.requests ADD "
            + _TEXT_INDEX.format(", posting_list_codec = 'bitpacking'"),
        ),
        {},
    ),
    "no index": (("ALTER TABLE {db}.requests DROP INDEX idx_search",), {}),
}


def list_copy_variants() -> dict[str, tuple[tuple[str, ...], dict[str, str]]]:
    """The list copy's ``trace`` and ``cost_known`` given by its view (migration 51, as a
    fresh store has it) and, as before, computed from ``detail`` by MATERIALIZED expressions
    (the view first stops giving them, then the columns take the old definitions)."""
    from promptrail.collector.store.request_tables import (
        REQUEST_ITEMS_BEFORE_51,
        REQUEST_ITEMS_MV_BEFORE_51,
    )
    from promptrail.collector.store.schema import ModifyColumn, ModifyQuery, render

    before = [
        *render(ModifyQuery(REQUEST_ITEMS_MV_BEFORE_51), "{db}", None),
        *render(ModifyColumn(REQUEST_ITEMS_BEFORE_51, "trace"), "{db}", None),
        *render(ModifyColumn(REQUEST_ITEMS_BEFORE_51, "cost_known"), "{db}", None),
    ]
    return {
        "given by the view (51)": ((), {}),
        "parsed from detail (before)": (tuple(s.replace("`{db}`", "{db}") for s in before), {}),
    }


def index_costs(
    total: int,
    size: int,
    rounds: int,
    variants: dict[str, tuple[tuple[str, ...], dict[str, str]]] | None = None,
    merged: str | None = "requests",
    inputs: bool = False,
) -> None:
    """Print the CPU per record of the log's inserts and of one merge of ``merged``, for
    each variant of its text index (INDEX_VARIANTS) or of ``variants``.

    Per round, a fresh migrated store per variant in this process, merges stopped; each block
    of ``size`` rows is inserted into every store in turn (a change of the machine's speed hits
    them alike), then each store's ``merged`` table merged into one part per month (``OPTIMIZE
    FINAL``, its merges alone started), the variants taking turns at going first. ``inputs``:
    the records carry their chat messages as input (encoded_blocks).
    """
    variants = variants or INDEX_VARIANTS
    from promptrail.collector.store.connection import close_client, open_client
    from promptrail.collector.store.migrations import migrate
    from promptrail.collector.store.requests import RequestStore

    blocks = encoded_blocks(max(total, size), size, inputs=inputs)
    names = list(variants)
    inserts: dict[str, list[float]] = {name: [] for name in names}
    merges: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="promptrail-index-") as scratch:
        client = open_client(f"chdb://{scratch}")
        try:
            for round_ in range(rounds):
                stores = {}
                for number, name in enumerate(names):
                    database = f"v{number}_{round_}"
                    migrate(client, database)
                    for (table,) in client.query(
                        "SELECT name FROM system.tables WHERE database = {db:String} "
                        "AND engine LIKE '%MergeTree'",
                        parameters={"db": database},
                    ).result_rows:
                        client.command(f"SYSTEM STOP MERGES {database}.`{table}`")
                    for statement in variants[name][0]:
                        client.command(statement.replace("{db}", database))
                    stores[name] = (database, RequestStore(client, database))
                for block in blocks:
                    for name in names:
                        began = process_cpu()
                        stores[name][1].insert([block], dict(variants[name][1]))
                        inserts[name].append((process_cpu() - began) / size * 1e6)
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    if merged is None:
                        break
                    database = stores[name][0]
                    client.command(f"SYSTEM START MERGES {database}.{merged}")
                    began = process_cpu()
                    client.command(f"OPTIMIZE TABLE {database}.{merged} FINAL")
                    merges[name].append((process_cpu() - began) / (len(blocks) * size) * 1e6)
                for database, _ in stores.values():
                    client.command(f"DROP DATABASE {database} SYNC")
                print(f"  round {round_ + 1} of {rounds} done", flush=True)
        finally:
            close_client(client)
    first = names[0]
    print(f"CPU per record, µs: the log's insert ({size:,}-row blocks, median), one merge")
    for name in names:
        paired = [a - b for a, b in zip(inserts[name], inserts[first], strict=True)]
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else [0.0] * 3
        line = (
            f"  {name:<28} insert {statistics.median(inserts[name]):6.1f} "
            f"({statistics.median(paired):+5.1f}, quartiles {quartiles[0]:+5.1f} / "
            f"{quartiles[2]:+5.1f})"
        )
        if merges[name]:
            line += (
                f"   merge {statistics.median(merges[name]):6.1f} "
                f"(rounds: {', '.join(f'{m:.1f}' for m in merges[name])})"
            )
        print(line, flush=True)
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


def measure_linking(args: argparse.Namespace, counts: list[int]) -> None:
    """Ingest the same unnamed chat records on a fresh collector for each count of chat
    versions, one after the other; print (and with --write-docs record) the rates."""
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    pool = chat_pool(random.Random(1))
    runs: list[tuple[int, IngestResult, int, float]] = []
    for count in counts:
        data_dir = _scratch_dir("promptrail-bench-linking-")
        with collector(data_dir, KEY, PROMPTRAIL_MAX_BODY_BYTES=str(64 << 20)) as served:
            create_chat_versions(served.url, count)
            first_ms = warm_up(served.url, pool[0])
            result = ingest(
                served.url,
                args.records,
                args.batch,
                args.workers,
                served.process.pid,
                pool=pool,
                coding=args.coding,
            )
            linked = linked_count(served.url)
        runs.append((count, result, linked, first_ms))
        print(
            f"{count:>6} chat versions: {ingest_summary(args, result)}; {linked:,} linked; "
            f"the first unnamed record took {first_ms:.0f} ms",
            flush=True,
        )
    rates: dict[int, list[float]] = {}
    cpu: dict[int, list[float]] = {}
    for count, result, _, _ in runs:
        cpu.setdefault(count, []).append(result.collector_cpu / result.accepted * 1e6)
        rates.setdefault(count, []).append(result.accepted / result.elapsed)
    base = statistics.mean(rates[min(rates)])
    base_cpu = statistics.mean(cpu[min(cpu)])
    ratios = [
        f"{count:,} chat versions: {statistics.mean(values):,.0f} records/s "
        f"({statistics.mean(values) / base - 1:+.1%}), collector CPU "
        f"{statistics.mean(cpu[count]):.0f} µs per record "
        f"({statistics.mean(cpu[count]) / base_cpu - 1:+.1%}) against {min(rates):,}"
        for count, values in sorted(rates.items())
    ]
    for line in ratios:
        print(line)
    if not args.write_docs:
        return
    lines = [
        LINKING_SECTION,
        "",
        f"Command: `.venv/bin/python benchmarks/request_log.py --records {args.records} "
        f"--chat-versions {','.join(map(str, counts))}`  ",
        f"Machine: {Machine.current().line()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d}; embedded store (chDB), a fresh collector per run, "
        f"the runs one after the other; load average before: {load}. The machine was shared "
        "with other work during the runs, so the rates move by more than the linking costs "
        "between runs of the same count.",
        "",
        "Records name no prompt and carry chat messages: half rendered from one of 1,000 chat "
        "versions (200 prompts of 5), a quarter one character off one, a quarter unrelated.",
        "",
        "| chat versions | records/s | collector CPU per record | records linked "
        "| first unnamed record |",
        "|---|---|---|---|---|",
        *(
            f"| {count:,} | {result.accepted / result.elapsed:,.0f} | "
            f"{result.collector_cpu / result.accepted * 1e6:.0f} µs | {linked:,} | "
            f"{first_ms:.0f} ms |"
            for count, result, linked, first_ms in runs
        ),
        "",
        *(f"- {line}." for line in ratios),
        "",
    ]
    write_section("\n".join(lines))
    print(f"wrote {DOCS}")


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
    parser.add_argument("--ingest-only", action="store_true", help="skip the read latencies")
    parser.add_argument(
        "--unpriced",
        action="store_true",
        help="records carry no cost: the collector prices each one at ingest",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="first insert the same records straight into a fresh chDB table: rate and ratio",
    )
    parser.add_argument(
        "--reads-now",
        action="store_true",
        help="measure reads right after the ingest (no wait for the rollup or a quiet machine)",
    )
    parser.add_argument(
        "--only", help="measure only the reads whose label contains one of these (a,b,...)"
    )
    parser.add_argument("--raw-threads", type=int, default=1, help="threads of the raw insert")
    parser.add_argument("--raw-batch", type=int, default=5000, help="rows per raw insert block")
    parser.add_argument(
        "--coding",
        choices=("zstd", "gzip"),
        default="zstd",
        help="the batch bodies' Content-Encoding (zstd: what the SDK posts to a collector "
        "that takes it; gzip: what it posts to one that does not)",
    )
    parser.add_argument("--raw-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--journal",
        choices=("on", "off"),
        default="on",
        help="the embedded store's request-log journal (records answered once journaled)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="skip the ingest: measure reads on --data-dir as an earlier run loaded it",
    )
    parser.add_argument(
        "--chat-versions",
        help="measure the linking of unnamed records: counts of chat versions to ingest "
        "against, one fresh collector each, in order (e.g. 0,1000,0,1000)",
    )
    parser.add_argument(
        "--view-costs",
        action="store_true",
        help="print each view's CPU per insert into the log (one row, --batch rows), no "
        "collector; --rounds rounds, --traced for records in traces",
    )
    parser.add_argument(
        "--index-costs",
        action="store_true",
        help="print the log's insert and merge CPU per record for each variant of its text "
        "index (--records in blocks of --batch, --rounds rounds), no collector",
    )
    parser.add_argument(
        "--list-copy-costs",
        action="store_true",
        help="print the log's insert CPU per record with the list copy's trace and cost_known "
        "given by its view and as before parsed from its detail (as --index-costs)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of --view-costs, --index-costs and --list-copy-costs",
    )
    parser.add_argument(
        "--traced", action="store_true", help="--view-costs: records in traces of 10"
    )
    parser.add_argument(
        "--inputs",
        action="store_true",
        help="--index-costs, --list-copy-costs: records carry their chat messages as input",
    )
    args = parser.parse_args()
    if args.view_costs:
        view_costs(args.records, args.batch, args.rounds, args.traced)
        return
    if args.index_costs:
        index_costs(args.records, args.batch, args.rounds, inputs=args.inputs)
        return
    if args.list_copy_costs:
        index_costs(args.records, args.batch, args.rounds, list_copy_variants(), None, args.inputs)
        return
    if args.chat_versions is not None:
        measure_linking(args, [int(count) for count in args.chat_versions.split(",")])
        return
    if args.raw_worker:
        print(
            json.dumps(asdict(raw_insert(args.records, args.batch, args.raw_worker, args.workers)))
        )
        return
    if args.reuse and not args.data_dir:
        parser.error("--reuse needs the --data-dir of an earlier run")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"CPU probe {cpu_probe_ms():.0f} ms; load average {load}", flush=True)
    raw = None
    if args.raw and not args.reuse:
        raw = raw_in_process(args.records, args.raw_batch, args.raw_threads)
        print(
            f"raw: {raw.records:,} records in {raw.seconds:.1f} s ({args.raw_threads} threads, "
            f"blocks of {args.raw_batch})",
            flush=True,
        )
    data_dir = args.data_dir or _scratch_dir("promptrail-bench-")
    data_dir.mkdir(parents=True, exist_ok=True)
    body_limit = {
        "PROMPTRAIL_MAX_BODY_BYTES": str(64 << 20),
        "PROMPTRAIL_REQUEST_JOURNAL": "1" if args.journal == "on" else "0",
    }
    with collector(data_dir, KEY, **body_limit) as served:
        base, process = served.url, served.process
        print(f"data dir {data_dir}; collector on {base}, pid {process.pid}", flush=True)
        watch = MemoryWatch(process.pid)
        print(f"load average {load}", flush=True)
        saved = data_dir / "ingest.json"
        if args.reuse:
            loaded = json.loads(saved.read_text())
            result, ingest_peak = IngestResult(**loaded["result"]), loaded["peak"]
            above = loaded.get("above_1gib")
            args.batch, args.workers = loaded["batch"], loaded["workers"]
        else:
            result = ingest(
                base,
                args.records,
                args.batch,
                args.workers,
                process.pid,
                not args.unpriced,
                coding=args.coding,
            )
            ingest_peak = watch.peak
            above = watch.seconds_above(1024)
            watch.write(data_dir / "rss-ingest.csv")
            saved.write_text(
                json.dumps(
                    {
                        "result": asdict(result),
                        "peak": ingest_peak,
                        "above_1gib": above,
                        "batch": args.batch,
                        "workers": args.workers,
                    }
                )
            )
        print(f"ingest: {ingest_summary(args, result)}", flush=True)
        if above is not None:
            print(f"ingest: RSS above 1 GiB for {above:.0f} s", flush=True)
        results: list[dict[str, Any]] = []
        settled = 0.0
        sealing = "not measured"
        if not args.ingest_only and args.reads_now:
            results = reads(base, result.accepted, args.samples, args.only)
        elif not args.ingest_only:
            # Analytics are measured as a collector serves them once its sealer caught up.
            sealing = wait_sealed(data_dir / "collector.log", since=datetime.now())
            print(f"rollup: {sealing}", flush=True)
            # Reads are measured on a settled store, not during the merges the load left.
            settled, _ = wait_quiet()
            print(f"quiet after {settled:.0f} s", flush=True)
            results = reads(base, result.accepted, args.samples, args.only)
        # With --reuse the ingest ran in an earlier collector: report the higher peak.
        peak = max(watch.stop(), ingest_peak)
        print(f"collector peak RSS {peak:.0f} MiB", flush=True)
    if raw is not None:
        # Once the collector is stopped: its merges would slow this raw insert, and the reads
        # "right after the load" would wait for it.
        after = raw_in_process(args.records, args.raw_batch, args.raw_threads)
        print(f"raw again: {after.records:,} records in {after.seconds:.1f} s", flush=True)
        print(f"ingest: {raw_summary(raw, after, result)}", flush=True)
    explain = explain_search(data_dir)
    print(explain)
    if args.write_docs:
        write_docs(args, result, load, peak, above, results, explain, settled, sealing)
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
