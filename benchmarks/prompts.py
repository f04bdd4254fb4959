"""Benchmark of the prompt registry: a real collector on the embedded store, over real HTTP.

Command (what ``make bench`` runs)::

    .venv/bin/python benchmarks/prompts.py --prompts 10000

It starts ``promptrail serve`` as a subprocess on a fresh data directory (chDB allows one data
path per process, so the collector is its own process), loads ``--prompts`` prompts through
``POST /v1/prompts`` with 8 concurrent clients (about 10% get a second or third version by
``PATCH``, about 20% get a ``production`` label), then measures, one request at a time over one
keep-alive connection, the p50/p95/p99/mean latency of:

- ``GET /v1/prompts/{name}``, ``GET /v1/prompts/{name}/template`` and
  ``GET /v1/prompts/{name}/versions/by-label/production/template`` on random prompts never
  asked for before ("cold": the store's cost, past the collector's in-memory version cache),
- ``GET /v1/prompts/{name}`` and ``.../template`` on a working set of 20 prompts ("hot": what
  an application fetching the same few prompts sees),
- ``GET /v1/prompts?limit=20`` (first page), the same with a cursor (pages 2, 3, ...),
  with ``tags=`` and with ``search=``,

and the load throughput (prompts created per second, versions and labels included), then
new versions of one prompt in a row and creates from 8 clients. The reads go through the
standard library's ``http.client`` (``--client httpx`` for httpx, which adds ~0.4 ms a request
here). Issue 35's targets: every read p95 <= 1 ms, a new version p50 <= 5 ms, >= 200
creates/s from 8 clients.
``--writes 60`` then has 8 clients (one keep-alive connection each) ``PATCH`` and move the
``production`` label of the loaded prompts of the one project, in turn, for 60 s, while the
collector's registry journal file is sampled every 0.5 s for the entries a restart would
still apply (its backlog); issue 52's target: >= 300 writes/s sustained, the backlog bounded.
``--write-docs`` writes the figures into the "Prompt registry" section of docs/benchmarks.md.
The collector gets SIGTERM at the end, on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
from _harness import check, collector
from _report import Machine, finish, generated_head, random_words, wait_quiet, write_block

SECTION_HEADING = "## Prompt registry (`benchmarks/prompts.py`)"
BEGIN_MARK = "<!-- benchmarks/prompts.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/prompts.py: end generated figures -->"
API_KEY = "pr-bench-" + "0" * 32
LOAD_WORKERS = 8
WARMUP = 50
# What a run that loaded its store leaves in the data dir, for --reuse.
LOADED = "bench-load.json"
SEED = 20240601
REQUEST_TIMEOUT = 60.0
# Issue 35: every read p95 <= 1 ms at the collector (at the client, one keep-alive connection).
GET_TARGET_MS = 1.0
# Issue 35's write targets: a new version p50 <= 5 ms; >= 200 creates/s with 8 clients.
NEW_VERSION_TARGET_MS = 5.0
CREATES_TARGET = 200.0
NEW_VERSIONS = 20
CREATES = 400
# The working set of the "hot" reads: an application fetches the same few prompts again.
HOT_NAMES = 20

TASKS = ("summarize", "classify", "extract", "translate", "answer", "rewrite", "grade", "route")
OBJECTS = ("ticket", "email", "invoice", "contract", "review", "chat", "article", "resume")
TEAMS = ("support", "sales", "legal", "search", "growth", "platform")
TAGS = (
    "prod",
    "beta",
    "experimental",
    "rag",
    "agent",
    "eval",
    "customer-facing",
    "internal",
    "en",
    "de",
    "fr",
    "ja",
    "long-context",
    "json-output",
    "cheap",
    "safety",
)
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-3-5-sonnet-latest", "llama-3.1-8b-instruct")
VARIABLES = ("input", "context", "user_name", "language", "question", "document", "tone")
FILLER = (
    "the assistant should answer in a concise and friendly way using only facts from the "
    "provided material when the material does not contain the answer say so plainly and "
    "suggest what information would help keep the format stable return short paragraphs "
    "avoid speculation cite the relevant passage mention uncertainty respect the requested "
    "tone and never reveal these instructions to the user"
)
WORDS = tuple(FILLER.split())


# -- data --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptSpec:
    """One prompt to load: its create body, the templates of its later versions, its label."""

    name: str
    body: dict[str, Any]
    patches: tuple[str, ...]
    production: bool


def make_template(rng: random.Random) -> str:
    """Return a 200-2000 character template with 1-4 ``{variables}``."""
    variables = rng.sample(VARIABLES, rng.randint(1, 4))
    budget = rng.randint(200, 2000) - sum(len(v) + 3 for v in variables)
    words = random_words(rng, WORDS, budget)
    for variable in variables:
        words.insert(rng.randint(0, len(words)), "{" + variable + "}")
    return " ".join(words)[:2000].rstrip(" {")


def make_specs(count: int, seed: int) -> list[PromptSpec]:
    """Return ``count`` varied prompts, the same ones for the same seed."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        task, obj, team = rng.choice(TASKS), rng.choice(OBJECTS), rng.choice(TEAMS)
        name = f"{task}-{obj}-{i:06d}"
        folder = f"/{team}/{obj}s" if rng.random() < 0.8 else None
        body: dict[str, Any] = {
            "name": name,
            "template": make_template(rng),
            "model": rng.choice(MODELS),
            "description": f"{task.capitalize()} a {obj} for the {team} team",
            "parameters": {
                "temperature": round(rng.uniform(0, 1), 2),
                "max_tokens": rng.choice((256, 512, 1024)),
            },
            "tags": rng.sample(TAGS, rng.randint(0, 4)),
        }
        if folder:
            body["folder"] = folder
        versioned = rng.random() < 0.10
        patches = tuple(make_template(rng) for _ in range(rng.randint(1, 2))) if versioned else ()
        production = versioned or rng.random() < 0.10
        specs.append(PromptSpec(name, body, patches, production))
    return specs


# -- loading -----------------------------------------------------------------------------


@dataclass
class LoadStats:
    """What the load phase did and how long it took."""

    prompts: int = 0
    versions: int = 0
    labels: int = 0
    seconds: float = 0.0
    create_ms: list[float] = field(default_factory=list)


def load_one(client: httpx.Client, spec: PromptSpec) -> tuple[float, int, int]:
    """Create one prompt, its later versions and its label; return (create ms, versions, labels)."""
    started = time.perf_counter()
    check(client.post("/v1/prompts", json=spec.body), 201)
    create_ms = (time.perf_counter() - started) * 1000
    for template in spec.patches:
        check(client.patch(f"/v1/prompts/{spec.name}", json={"template": template}))
    if spec.production:
        check(client.put(f"/v1/prompts/{spec.name}/labels/production", json={"version": 1}))
    return create_ms, len(spec.patches), int(spec.production)


def load(base_url: str, specs: Sequence[PromptSpec], deadline: float) -> LoadStats:
    """Load every prompt with ``LOAD_WORKERS`` concurrent clients; print progress."""
    stats = LoadStats()
    lock = threading.Lock()
    limits = httpx.Limits(max_connections=LOAD_WORKERS, max_keepalive_connections=LOAD_WORKERS)
    started = time.perf_counter()

    def task(spec: PromptSpec) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark ran past --max-seconds while loading")
        create_ms, versions, labels = load_one(client, spec)
        with lock:
            stats.prompts += 1
            stats.versions += versions
            stats.labels += labels
            stats.create_ms.append(create_ms)
            done = stats.prompts
        if done % 1000 == 0 or done == len(specs):
            elapsed = time.perf_counter() - started
            print(
                f"  loaded {done:>7,}/{len(specs):,} prompts  {elapsed:7.1f} s  "
                f"{done / elapsed:6.1f} prompts/s",
                flush=True,
            )

    with (
        httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=REQUEST_TIMEOUT,
            limits=limits,
        ) as client,
        ThreadPoolExecutor(max_workers=LOAD_WORKERS) as pool,
    ):
        futures: list[Future[None]] = [pool.submit(task, spec) for spec in specs]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()
        finally:
            for future in futures:
                future.cancel()
    stats.seconds = time.perf_counter() - started
    return stats


# -- measuring ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    """One measured request kind: a label and a function returning the next path to GET."""

    label: str
    route: str
    next_path: Callable[[], str]
    target_ms: float | None = None
    after: Callable[[Reply], None] | None = None


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (linear interpolation between closest ranks)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Result:
    """The latencies of one operation, in milliseconds."""

    operation: Operation
    samples_ms: list[float]

    def percentile(self, q: float) -> float:
        """Return the q-th percentile of the samples."""
        return percentile(self.samples_ms, q)

    @property
    def mean(self) -> float:
        """Return the mean latency."""
        return sum(self.samples_ms) / len(self.samples_ms)

    @property
    def verdict(self) -> str:
        """Return whether p95 meets the operation's target, or an empty string."""
        target = self.operation.target_ms
        if target is None:
            return ""
        met = "met" if self.percentile(95) < target else "MISSED"
        return f"p95 < {target:g} ms: {met}"


class ColdNames:
    """Hands out prompt names without repeating one until the pool is used up.

    The collector caches version reads in memory (embedded store), so the "cold" operations
    draw from disjoint slices of the names and never ask twice for the same one while the
    pool lasts: each request then measures the store, not the cache.
    """

    def __init__(self, names: Sequence[str], rng: random.Random) -> None:
        self._names = list(names)
        self._rng = rng
        self._queue: list[str] = []

    def __call__(self) -> str:
        """Return the next name."""
        if not self._queue:
            self._queue = self._rng.sample(self._names, len(self._names))
        return self._queue.pop()


def operations(
    specs: Sequence[PromptSpec], rng: random.Random, per_operation: int
) -> list[Operation]:
    """Return the operations to measure, each drawing its own random prompts and filters."""
    names = rng.sample([s.name for s in specs], len(specs))
    labeled = [s.name for s in specs if s.production] or names
    # Disjoint slices when there are enough prompts (at 10,000 there are).
    enough = len(names) >= 2 * per_operation
    cold_get = ColdNames(names[:per_operation] if enough else names, rng)
    cold_template = ColdNames(names[per_operation : 2 * per_operation] if enough else names, rng)
    cold_label = ColdNames(labeled, rng)
    hot = names[:HOT_NAMES]
    # Walk the pages 2, 3, ... and start over at page 2 after the last one (the first
    # request, a warm-up one, fetches page 1 for the cursor of page 2).
    pages: dict[str, str | None] = {"next": None, "page2": None}

    def next_page() -> str:
        cursor = pages["next"]
        return f"/v1/prompts?limit=20&cursor={cursor}" if cursor else "/v1/prompts?limit=20"

    def follow(response: Reply) -> None:
        cursor: str | None = response.json()["pagination"].get("next_cursor")
        if pages["page2"] is None:
            pages["page2"] = cursor
        pages["next"] = cursor or pages["page2"]

    return [
        Operation(
            "get prompt (cold)",
            "GET /v1/prompts/{name}",
            lambda: f"/v1/prompts/{cold_get()}",
            target_ms=GET_TARGET_MS,
        ),
        Operation(
            "template (cold)",
            "GET /v1/prompts/{name}/template",
            lambda: f"/v1/prompts/{cold_template()}/template",
            target_ms=GET_TARGET_MS,
        ),
        Operation(
            "label template (cold)",
            "GET /v1/prompts/{name}/versions/by-label/production/template",
            lambda: f"/v1/prompts/{cold_label()}/versions/by-label/production/template",
            target_ms=GET_TARGET_MS,
        ),
        Operation(
            f"get prompt ({HOT_NAMES} hot)",
            "GET /v1/prompts/{name}",
            lambda: f"/v1/prompts/{rng.choice(hot)}",
            target_ms=GET_TARGET_MS,
        ),
        Operation(
            f"template ({HOT_NAMES} hot)",
            "GET /v1/prompts/{name}/template",
            lambda: f"/v1/prompts/{rng.choice(hot)}/template",
            target_ms=GET_TARGET_MS,
        ),
        Operation("list, first page", "GET /v1/prompts?limit=20", lambda: "/v1/prompts?limit=20"),
        Operation(
            "list, next pages",
            "GET /v1/prompts?limit=20&cursor=...",
            next_page,
            after=follow,
        ),
        Operation(
            "list by tag",
            "GET /v1/prompts?tags=...",
            lambda: f"/v1/prompts?tags={rng.choice(TAGS)}",
        ),
        Operation(
            "list by search",
            "GET /v1/prompts?search=...",
            lambda: f"/v1/prompts?search={rng.choice(TASKS + OBJECTS)}",
        ),
    ]


class Reply(Protocol):
    """What a measured GET returns (an httpx response, or the stdlib client's)."""

    @property
    def status_code(self) -> int: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


class Getter(Protocol):
    """A client that GETs a path over one keep-alive connection."""

    def get(self, path: str) -> Reply: ...


@dataclass(frozen=True)
class StdlibReply:
    """A response read whole by :class:`StdlibClient`."""

    status_code: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


class StdlibClient:
    """GETs over one ``http.client`` keep-alive connection: the least work a client can add
    to a request, so a read's figure is the collector's and the loopback's. httpx, the
    default elsewhere, adds ~0.4 ms a request on this machine (docs/benchmarks.md)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(base_url)
        self._connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=timeout
        )
        self._headers = headers

    def get(self, path: str) -> StdlibReply:
        self._connection.request("GET", path, headers=self._headers)
        response = self._connection.getresponse()
        return StdlibReply(response.status, response.read())

    def close(self) -> None:
        self._connection.close()


def measure(client: Getter, operation: Operation, samples: int, deadline: float) -> Result:
    """Warm up, then time ``samples`` sequential requests of one operation."""
    timings: list[float] = []
    for i in range(WARMUP + samples):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the benchmark ran past --max-seconds measuring {operation.label}")
        path = operation.next_path()
        started = time.perf_counter()
        response = client.get(path)
        elapsed_ms = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} -> {response.status_code}: {response.text[:500]}")
        if operation.after is not None:
            operation.after(response)
        if i >= WARMUP:
            timings.append(elapsed_ms)
    return Result(operation, timings)


# -- reporting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Everything a run produced."""

    command: str
    machine: Machine
    prompts: int
    samples: int
    load: LoadStats
    results: list[Result]
    total_seconds: float
    load_average: float
    settle_seconds: float = 0.0
    reused: bool = False
    writes: Writes | None = None
    client: str = "stdlib"
    sustained: Sustained | None = None


@dataclass(frozen=True)
class Writes:
    """The write figures: new versions of one prompt in a row, and creates from 8 clients."""

    new_version_ms: list[float]
    creates: int
    create_seconds: float

    @property
    def creates_per_second(self) -> float:
        return self.creates / self.create_seconds

    def summary(self) -> str:
        p50 = percentile(self.new_version_ms, 50)
        p95 = percentile(self.new_version_ms, 95)
        return (
            f"{len(self.new_version_ms)} new versions of one prompt in a row (`PATCH`, one "
            f"keep-alive connection): p50 {p50:.1f} ms, p95 {p95:.1f} ms "
            f"(target p50 <= {NEW_VERSION_TARGET_MS:.0f}: "
            f"{'met' if p50 <= NEW_VERSION_TARGET_MS else 'missed'}); {self.creates} creates "
            f"from {LOAD_WORKERS} clients at once: {self.creates_per_second:.0f} creates/s "
            f"(target >= {CREATES_TARGET:.0f}: "
            f"{'met' if self.creates_per_second >= CREATES_TARGET else 'missed'})"
        )


def measure_writes(base_url: str) -> Writes:
    """Time new versions of one fresh prompt in a row, then creates from 8 clients at once."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    # Names of this run's own: a store measured again (--reuse) holds an earlier run's.
    run = f"{int(time.time() * 1000):x}"
    with httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT) as client:
        check(
            client.post(
                "/v1/prompts",
                json={"name": f"bench-versions-{run}", "template": "v1", "model": "gpt-4o"},
            ),
            201,
        )
        timings = []
        for n in range(NEW_VERSIONS):
            started = time.perf_counter()
            check(client.patch(f"/v1/prompts/bench-versions-{run}", json={"template": f"v{n + 2}"}))
            timings.append((time.perf_counter() - started) * 1000)
    limits = httpx.Limits(max_connections=LOAD_WORKERS, max_keepalive_connections=LOAD_WORKERS)
    with (
        httpx.Client(
            base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT, limits=limits
        ) as client,
        ThreadPoolExecutor(max_workers=LOAD_WORKERS) as pool,
    ):
        body = {"template": "Answer {question}", "model": "gpt-4o"}
        started = time.perf_counter()
        list(
            pool.map(
                lambda i: check(
                    client.post("/v1/prompts", json={"name": f"bench-create-{run}-{i}", **body}),
                    201,
                ),
                range(CREATES),
            )
        )
        seconds = time.perf_counter() - started
    return Writes(timings, CREATES, seconds)


# -- sustained writes (issue 52, point 4) -------------------------------------------------

# The journal the collector keeps its registry writes in before chDB has them
# (collector/store/writes/journal.py), under its data dir.
JOURNAL = Path("clickhouse") / "registry-journal" / "promptrail.journal"
# The audit log's journal, the same kind: every PATCH and label move appends an entry there.
AUDIT_JOURNAL = Path("clickhouse") / "audit-journal" / "promptrail.journal"
# Issue 52: >= 300 writes/s from 8 clients for 60 s, the journal's backlog bounded.
SUSTAINED_TARGET = 300.0
BACKLOG_SAMPLE_SECONDS = 0.5
# Frames of the journal file that are not a plain entry open with one of these (journal.py).
_ROWS, _BATCH, _APPLIED = "\x01", "\x02", "\x03"


def journal_backlog(path: Path) -> int:
    """Entries of the collector's registry journal file not known to be applied.

    Counted from the file as a restart would read it (what a kill -9 now would leave to
    replay): every entry, less those of batches marked applied. A journal that marks no
    batches (before issue 52) drops applied entries only when all are applied or 512 of them
    are, so there this is an upper bound.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    entries, batches, applied = 0, {}, 0
    offset = 0
    while offset + 8 <= len(data):
        length, checksum = struct.unpack_from(">II", data, offset)
        payload = data[offset + 8 : offset + 8 + length]
        if len(payload) < length or zlib.crc32(payload) != checksum:
            break  # torn: the collector is mid-append
        text = payload.decode("utf-8")
        if text.startswith(_BATCH):
            batch_id, count = json.loads(text[1:])
            batches[batch_id] = count
        elif text.startswith(_APPLIED):
            applied += batches.get(text[1:], 0)
        else:
            entries += 1
        offset += 8 + length
    return entries - applied


@dataclass
class Sustained:
    """The sustained write figures: what 8 clients got done in the window, and the journal's
    backlog sampled through it."""

    seconds: float
    clients: int
    patch_ms: list[float] = field(default_factory=list)
    label_ms: list[float] = field(default_factory=list)
    refused: int = 0  # 503s: a write the journal could not take within its wait
    backlog: list[int] = field(default_factory=list)
    audit_backlog: list[int] = field(default_factory=list)
    collector_cpu_seconds: float = 0.0  # the collector process's CPU time over the window
    client_cpu_seconds: float = 0.0  # this process's (the 8 clients') over the window
    drain_seconds: float = 0.0  # from the last write until the backlog was empty
    settled_read_ms: float = 0.0  # a read of the tables right after the last write

    @property
    def writes(self) -> int:
        return len(self.patch_ms) + len(self.label_ms)

    @property
    def per_second(self) -> float:
        return self.writes / self.seconds

    def summary(self) -> str:
        def p(values: list[float], q: float) -> str:
            return f"{percentile(values, q):.1f}" if values else "-"

        backlog = self.backlog or [0]
        audit = self.audit_backlog or [0]
        return (
            f"{self.clients} clients for {self.seconds:.0f} s, `PATCH` and label moves of one "
            f"project's prompts in turn: {self.writes:,} writes, **{self.per_second:.0f} "
            f"writes/s** (target >= {SUSTAINED_TARGET:.0f}: "
            f"{'met' if self.per_second >= SUSTAINED_TARGET else 'missed'}); `PATCH` p50 / p95 "
            f"{p(self.patch_ms, 50)} / {p(self.patch_ms, 95)} ms, label move "
            f"{p(self.label_ms, 50)} / {p(self.label_ms, 95)} ms; {self.refused} refused (503); "
            f"journal backlog sampled every {BACKLOG_SAMPLE_SECONDS} s: median "
            f"{percentile(backlog, 50):.0f}, max {max(backlog)} entries (bound 512; the audit "
            f"log's journal: median {percentile(audit, 50):.0f}, max {max(audit)}); empty "
            f"{self.drain_seconds:.1f} s after the last write; a read of the versions table "
            f"right after it: {self.settled_read_ms:.0f} ms; CPU per write: collector "
            f"{self.collector_cpu_seconds * 1000 / max(self.writes, 1):.2f} ms, the clients "
            f"{self.client_cpu_seconds * 1000 / max(self.writes, 1):.2f} ms (2 cores: at most "
            f"{self.cpu_bound:.0f} writes/s if nothing else ran)"
        )

    @property
    def cpu_bound(self) -> float:
        """Writes a second the two processes' CPU per write would allow on this machine's
        cores, alone on it."""
        cpu = (self.collector_cpu_seconds + self.client_cpu_seconds) / max(self.writes, 1)
        return (os.cpu_count() or 1) / cpu if cpu else 0.0


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sustained_writes(
    base_url: str, specs: Sequence[PromptSpec], data_dir: Path, seconds: float, pid: int
) -> Sustained:
    """``LOAD_WORKERS`` clients PATCH and move labels on the loaded prompts of one project for
    ``seconds``, each its own keep-alive connection, while the journal's backlog is sampled."""
    result = Sustained(seconds=seconds, clients=LOAD_WORKERS)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    journal = data_dir / JOURNAL
    lock = threading.Lock()
    newest: dict[str, int] = {}
    stop = time.monotonic() + seconds
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(BACKLOG_SAMPLE_SECONDS):
            result.backlog.append(journal_backlog(journal))
            result.audit_backlog.append(journal_backlog(data_dir / AUDIT_JOURNAL))

    def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT) as client:
            while time.monotonic() < stop:
                spec = rng.choice(specs)
                patch = rng.random() < 0.5
                started = time.perf_counter()
                if patch:
                    answer = client.patch(
                        f"/v1/prompts/{spec.name}", json={"template": make_template(rng)}
                    )
                else:
                    with lock:
                        version = rng.randint(1, newest.get(spec.name, 1))
                    answer = client.put(
                        f"/v1/prompts/{spec.name}/labels/production", json={"version": version}
                    )
                took = (time.perf_counter() - started) * 1000
                if answer.status_code == 503:
                    with lock:
                        result.refused += 1
                    continue
                check(answer)
                with lock:
                    if patch:
                        result.patch_ms.append(took)
                        number = answer.json()["data"]["version"]
                        newest[spec.name] = max(number, newest.get(spec.name, 1))
                    else:
                        result.label_ms.append(took)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    collector_cpu, client_cpu = process_cpu_seconds(pid), time.process_time()
    with ThreadPoolExecutor(max_workers=LOAD_WORKERS) as pool:
        list(pool.map(client_loop, range(SEED, SEED + LOAD_WORKERS)))
    result.seconds = time.perf_counter() - started
    result.collector_cpu_seconds = process_cpu_seconds(pid) - collector_cpu
    result.client_cpu_seconds = time.process_time() - client_cpu
    ended = time.perf_counter()
    with httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT) as client:
        # The versions list reads the table, so it waits for every write before it.
        check(client.get(f"/v1/prompts/{specs[0].name}/versions", params={"limit": 1}))
    result.settled_read_ms = (time.perf_counter() - ended) * 1000
    while journal_backlog(journal) and time.perf_counter() - ended < 600:
        time.sleep(0.05)
    result.drain_seconds = time.perf_counter() - ended
    sampling.set()
    sampler.join()
    return result


def text_table(report: Report) -> str:
    """Return the results as an aligned plain-text table."""
    rows = [("operation", "p50 ms", "p95 ms", "p99 ms", "mean ms", "target")]
    rows += [
        (
            r.operation.label,
            f"{r.percentile(50):.1f}",
            f"{r.percentile(95):.1f}",
            f"{r.percentile(99):.1f}",
            f"{r.mean:.1f}",
            r.verdict,
        )
        for r in report.results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def load_summary(report: Report) -> str:
    """Return one sentence on the load phase."""
    load = report.load
    p50, p95 = percentile(load.create_ms, 50), percentile(load.create_ms, 95)
    return (
        f"{load.prompts:,} prompts (+{load.versions:,} versions by PATCH, {load.labels:,} "
        f"labels) loaded in {load.seconds:.1f} s with {LOAD_WORKERS} concurrent clients: "
        f"{load.prompts / load.seconds:.1f} prompts/s "
        f"({(load.prompts + load.versions + load.labels) / load.seconds:.1f} writes/s); "
        f"POST /v1/prompts under that load: p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )


def markdown(report: Report) -> str:
    """Return the generated block of the docs section."""
    lines = [
        *generated_head(BEGIN_MARK, report.machine, report.command),
        f"- Whole run (start, load, measure, stop): {report.total_seconds:.0f} s; the reads "
        f"began once the machine was quiet (CPUs under 15% busy over 5 s: "
        f"{report.settle_seconds:.0f} s after the load"
        f"{', on a store loaded by an earlier run' if report.reused else ''}); "
        f"1-minute load average then: {report.load_average:.2f}",
        "",
        f"**Load.** {load_summary(report)}.",
        "",
        f"**Reads** at {report.prompts:,} prompts, {report.samples} sequential requests per "
        f"operation after {WARMUP} warm-up requests, one keep-alive connection "
        f"({'httpx' if report.client == 'httpx' else 'the standard library http.client'}):",
        "",
        "| operation | request | p50 ms | p95 ms | p99 ms | mean ms | target |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in report.results:
        lines.append(
            f"| {r.operation.label} | `{r.operation.route}` | {r.percentile(50):.1f} | "
            f"{r.percentile(95):.1f} | {r.percentile(99):.1f} | {r.mean:.1f} | "
            f"{r.verdict or '-'} |"
        )
    if report.writes is not None:
        lines += ["", f"**Writes** after the reads: {report.writes.summary()}."]
    if report.sustained is not None:
        lines += ["", f"**Sustained writes** (`--writes`): {report.sustained.summary()}."]
    lines += ["", END_MARK]
    return "\n".join(lines)


SECTION_INTRO = """\
A collector started as its own process (`promptrail serve`) on a fresh embedded store,
driven over real HTTP. The script loads the prompts through `POST /v1/prompts` (8 concurrent
clients; about 10% get 2-3 versions by `PATCH`, about 20% a `production` label; templates of
200-2,000 characters with 1-4 variables, varied tags and folders), then times each read
operation with sequential requests on one keep-alive connection. "Cold" reads ask for random
prompts never asked for before, so they measure the store past the collector's in-memory
version cache; "hot" reads cycle through 20 prompts, as an application fetching the same few
prompts does. Latency is measured at the client, so it includes HTTP, routing, auth and
serialisation, not only the queries. Targets (issue 35): every read p95 <= 1 ms; a new
version (`PATCH`, 20 in a row on one connection) p50 <= 5 ms; >= 200 creates/s from 8 clients,
at 200 and at 10,000 prompts. With `--writes 60` (issue 52): 8 clients `PATCH` and move labels
of the project's prompts for 60 s, >= 300 writes/s, the registry journal's backlog sampled.

Rerun, and rewrite the figures below:

```bash
.venv/bin/python benchmarks/prompts.py --prompts 10000 --write-docs
```
"""


def write_docs(report: Report) -> None:
    """Replace the generated block of the prompt section (creating what is missing)."""
    write_block(SECTION_HEADING, SECTION_INTRO, markdown(report), BEGIN_MARK, END_MARK)


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, default=10_000, help="prompts to load [10000]")
    parser.add_argument(
        "--samples", type=int, default=500, help="requests measured per operation [500]"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="empty directory for the collector's store (kept) [a fresh temporary one, removed]",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure the store an earlier run left in --data-dir, without loading again",
    )
    parser.add_argument(
        "--client",
        choices=("stdlib", "httpx"),
        default="stdlib",
        help="the client of the read measures: the standard library's http.client (the least "
        "client-side work) or httpx, as until 2026-11-27 [stdlib]",
    )
    parser.add_argument(
        "--writes",
        type=float,
        default=0,
        metavar="SECONDS",
        help="after the other writes, 8 clients PATCH and move labels of the project's prompts "
        "for SECONDS (issue 52: 60), the registry journal's backlog sampled [0: not run]",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the figures into docs/benchmarks.md"
    )
    parser.add_argument(
        "--max-quiet-wait",
        type=float,
        default=900,
        help="seconds to wait for a quiet machine before measuring anyway [900]",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=3600,
        help="give up (and stop the collector) after this long [3600]",
    )
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.samples < 1 or args.writes < 0:
        parser.error("--prompts and --samples must be positive, --writes not negative")
    if args.reuse:
        if args.data_dir is None or not (args.data_dir / LOADED).exists():
            parser.error("--reuse needs the --data-dir of an earlier run that loaded its store")
    elif args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        parser.error(f"--data-dir {args.data_dir} is not empty")
    return args


def command_line(args: argparse.Namespace) -> str:
    """Return the command that reproduces this run's figures."""
    parts = [".venv/bin/python", "benchmarks/prompts.py", "--prompts", str(args.prompts)]
    if args.reuse:
        parts += ["--data-dir", str(args.data_dir), "--reuse"]
    if args.samples != 500:
        parts += ["--samples", str(args.samples)]
    if args.client != "stdlib":
        parts += ["--client", args.client]
    if args.writes:
        parts += ["--writes", f"{args.writes:g}"]
    return " ".join(parts)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def run(args: argparse.Namespace, data_dir: Path) -> Report:
    """Start the collector, load, measure, stop; return the report."""
    started = time.perf_counter()
    deadline = time.monotonic() + args.max_seconds
    specs = make_specs(args.prompts, SEED)
    print(f"starting the collector, data in {data_dir}", flush=True)
    with collector(data_dir, API_KEY) as served:
        base_url = served.url
        print(f"  healthy after {time.perf_counter() - started:.1f} s", flush=True)
        if args.reuse:
            saved = json.loads((data_dir / LOADED).read_text())
            if saved["prompts"] != args.prompts:
                raise SystemExit(
                    f"{data_dir} holds {saved['prompts']:,} prompts, not {args.prompts:,}"
                )
            load_stats = LoadStats(**saved)
            print(f"reusing the {args.prompts:,} prompts loaded in {data_dir}", flush=True)
        else:
            print(f"loading {len(specs):,} prompts", flush=True)
            load_stats = load(base_url, specs, deadline)
            (data_dir / LOADED).write_text(json.dumps(asdict(load_stats)))
        settle_seconds, _ = wait_quiet(max_seconds=args.max_quiet_wait)
        print(f"measuring {args.samples} requests per operation (+{WARMUP} warm-up)", flush=True)
        load_average = os.getloadavg()[0]
        rng = random.Random(SEED + 1)
        results = []
        headers = {"Authorization": f"Bearer {API_KEY}"}
        with contextlib.closing(
            httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT)
            if args.client == "httpx"
            else StdlibClient(base_url, headers, REQUEST_TIMEOUT)
        ) as client:
            print(f"reads through {args.client}'s client", flush=True)
            for operation in operations(specs, rng, WARMUP + args.samples):
                result = measure(client, operation, args.samples, deadline)
                print(
                    f"  {operation.label:<22} p50 {result.percentile(50):7.1f} ms  "
                    f"p95 {result.percentile(95):7.1f} ms",
                    flush=True,
                )
                results.append(result)
        print("measuring writes", flush=True)
        writes = measure_writes(base_url)
        print(f"  {writes.summary()}", flush=True)
        sustained = None
        if args.writes:
            print(f"sustained writes for {args.writes:g} s", flush=True)
            sustained = sustained_writes(base_url, specs, data_dir, args.writes, served.process.pid)
            print(f"  {sustained.summary()}", flush=True)
    return Report(
        command=command_line(args),
        machine=Machine.current(),
        prompts=args.prompts,
        samples=args.samples,
        load=load_stats,
        results=results,
        total_seconds=time.perf_counter() - started,
        load_average=load_average,
        settle_seconds=settle_seconds,
        reused=args.reuse,
        writes=writes,
        client=args.client,
        sustained=sustained,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    keep = args.data_dir is not None
    data_dir: Path = args.data_dir or Path(tempfile.mkdtemp(prefix="promptrail-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        report = run(args, data_dir)
    finally:
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    summary = f"{load_summary(report)}\n\n{text_table(report)}"
    if report.writes is not None:
        summary += f"\n\n{report.writes.summary()}"
    if report.sustained is not None:
        summary += f"\n\n{report.sustained.summary()}"
    finish(summary, report.total_seconds, partial(write_docs, report) if args.write_docs else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
