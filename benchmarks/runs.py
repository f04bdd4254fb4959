"""Benchmark of runs: the collector's own overhead per run, and many concurrent streams.

Command::

    .venv/bin/python benchmarks/runs.py [--write-docs]

It starts a zero-latency OpenAI stub (the wire-format stub of
``promptrail.testing``, as its own process) and a collector (``promptrail serve`` on a fresh temporary data directory, with
``OPENAI_BASE_URL`` pointing at the stub), creates one prompt, then measures:

1. **Overhead per non-stream run**: ``--samples`` sequential runs through the collector
   (``POST /v1/prompts/{name}/run``), each paired with a direct call to the stub carrying the
   same messages, both on keep-alive connections. The overhead is the run's latency minus the
   direct call's, at p50 and p95. The records of the runs give the breakdown (version lookup
   and rendering, the provider call as the collector saw it), and the rest is HTTP and auth
   (the record's insert runs behind the answer; reads of the log wait for it).
2. **Stream throughput**: 32 clients streaming runs back to back for ``--stream-seconds``:
   runs/s and errors.
3. **Held streams**: 200 streams open at once (the stub spaces 16 chunks 0.25 s apart, so
   each lasts about 4 s): how many complete, errors, the peak number open together, and the
   time to the ``start`` event and to the first chunk.

Targets (from the issue): under 5 ms p50 added per non-stream run; 200+ concurrent streams
held without errors. ``--write-docs`` writes the figures into the "Runs" section of
docs/benchmarks.md (other sections are kept). Every process started is stopped at the end,
on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from _harness import check, clean_env, collector, free_port, process, wait_until
from _report import Machine, finish, generated_head, write_block

SECTION_HEADING = "## Runs (`benchmarks/runs.py`)"
BEGIN_MARK = "<!-- benchmarks/runs.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/runs.py: end generated figures -->"
API_KEY = "pr-bench-runs-" + "0" * 24
PROVIDER_KEY = "sk-bench"
PROMPT = "bench"
TEMPLATE = "Summarize this for {audience}: {text}"
VARIABLES = {"audience": "a busy engineer", "text": "ClickHouse stores columns, not rows."}
REPLY = "Columns are stored apart, so scans read only what a query needs and compress well."
WARMUP = 30
STREAM_CLIENTS = 32
HELD_STREAMS = 200
HELD_CHUNKS = 16
HELD_CHUNK_DELAY = 0.25
REQUEST_TIMEOUT = 120.0
OVERHEAD_TARGET_MS = 5.0


# -- processes ---------------------------------------------------------------------------


def serve_stub(port: int) -> None:
    """Run the OpenAI stub on ``port`` until terminated, with a ``POST /control`` route."""
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from promptrail.testing import OpenAIStub, Script

    stub = OpenAIStub()

    async def control(request: Request) -> JSONResponse:
        script = Script(**await request.json())
        stub.reset()
        stub.script = script
        return JSONResponse({"ok": True})

    stub.app.router.routes.append(Route("/control", control, methods=["POST"]))
    uvicorn.run(stub.app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


@contextlib.contextmanager
def stub_and_collector(data_dir: Path) -> Iterator[tuple[str, str]]:
    """Start the stub and a collector pointed at it; yield (stub URL, collector URL)."""
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    stub_command = [sys.executable, __file__, "--serve-stub", str(stub_port)]
    stub_log = data_dir.parent / f"{data_dir.name}-stub.log"
    with process(stub_command, clean_env(), stub_log) as stub:
        wait_until(f"{stub_url}/control", "the stub", stub, stub_log)
        provider = {"OPENAI_BASE_URL": f"{stub_url}/v1", "OPENAI_API_KEY": PROVIDER_KEY}
        with collector(data_dir, API_KEY, **provider) as served:
            yield stub_url, served.url


# -- measuring ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of values, or NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class Overhead:
    """Paired timings of runs through the collector and direct calls to the stub."""

    run_ms: list[float] = field(default_factory=list)
    direct_ms: list[float] = field(default_factory=list)
    log_ms: list[float] = field(default_factory=list)
    pre_process_ms: list[float] = field(default_factory=list)
    llm_call_ms: list[float] = field(default_factory=list)
    recorded_latency_ms: list[float] = field(default_factory=list)

    def added(self, q: float) -> float:
        """Return the collector's own share at percentile q."""
        return percentile(self.run_ms, q) - percentile(self.direct_ms, q)


def measure_overhead(stub_url: str, collector_url: str, samples: int) -> Overhead:
    """Time runs through the collector against direct stub calls, interleaved."""
    messages = [{"role": "user", "content": TEMPLATE.format(**VARIABLES)}]
    direct_body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0}
    run_body = {"variables": VARIABLES, "metadata": {"bench": "overhead"}}
    # The reference: auth and one acknowledged record insert, without a run around them.
    log_body = {"prompt_name": PROMPT, "model": "gpt-4o-mini", "output": REPLY}
    result = Overhead()
    ids: list[str] = []
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with (
        httpx.Client(base_url=collector_url, headers=headers, timeout=REQUEST_TIMEOUT) as api,
        httpx.Client(base_url=stub_url, timeout=REQUEST_TIMEOUT) as direct,
    ):
        for index in range(WARMUP + samples):
            started = time.perf_counter()
            check(direct.post("/v1/chat/completions", json=direct_body))
            direct_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            response = check(api.post(f"/v1/prompts/{PROMPT}/run", json=run_body))
            run_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            check(api.post("/v1/requests", json=log_body), 201)
            log_ms = (time.perf_counter() - started) * 1000
            if index >= WARMUP:
                result.direct_ms.append(direct_ms)
                result.run_ms.append(run_ms)
                result.log_ms.append(log_ms)
                ids.append(response.json()["data"]["id"])
        for request_id in ids[:: max(1, len(ids) // 100)]:
            record = check(api.get(f"/v1/requests/{request_id}")).json()["data"]
            result.pre_process_ms.append(record["timing"]["pre_process_ms"])
            result.llm_call_ms.append(record["timing"]["llm_call_ms"])
            result.recorded_latency_ms.append(record["timing"]["total_latency_ms"])
    return result


@dataclass
class StreamOutcome:
    """One streamed run as the client saw it."""

    ok: bool
    error: str = ""
    opened: float = 0.0
    started: float | None = None
    first_chunk: float | None = None
    ended: float | None = None
    chunks: int = 0


async def stream_once(client: httpx.AsyncClient) -> StreamOutcome:
    """Run the prompt as a stream; read it to the end."""
    outcome = StreamOutcome(ok=False, opened=time.perf_counter())
    body = {"variables": VARIABLES, "stream": True, "metadata": {"bench": "stream"}}
    try:
        async with client.stream("POST", f"/v1/prompts/{PROMPT}/run", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                outcome.error = f"HTTP {response.status_code}"
                return outcome
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line.removeprefix("data: "))
                now = time.perf_counter()
                if event["type"] == "start":
                    outcome.started = now
                elif event["type"] == "chunk":
                    outcome.first_chunk = outcome.first_chunk or now
                    outcome.chunks += 1
                elif event["type"] == "end":
                    outcome.ended, outcome.ok = now, True
                elif event["type"] == "error":
                    outcome.error = f"error event: {event['error']['code']}"
    except httpx.HTTPError as exc:
        outcome.error = type(exc).__name__
    if not outcome.ok and not outcome.error:
        outcome.error = "stream ended without end event"
    return outcome


def async_client(collector_url: str, connections: int) -> httpx.AsyncClient:
    """Return a client able to hold ``connections`` streams at once."""
    return httpx.AsyncClient(
        base_url=collector_url,
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=REQUEST_TIMEOUT,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


class Streams:
    """What is counted of any set of streams: those completed, and the failures by kind."""

    outcomes: list[StreamOutcome]

    @property
    def completed(self) -> int:
        """Return the streams that reached their end event."""
        return sum(o.ok for o in self.outcomes)

    @property
    def errors(self) -> Counter[str]:
        """Return the failures by kind."""
        return Counter(o.error for o in self.outcomes if not o.ok)


@dataclass
class Throughput(Streams):
    """Streams run back to back by concurrent clients."""

    clients: int
    seconds: float
    outcomes: list[StreamOutcome]


async def stream_throughput(collector_url: str, clients: int, seconds: float) -> Throughput:
    """Let ``clients`` workers stream runs back to back for ``seconds``."""
    outcomes: list[StreamOutcome] = []
    deadline = time.perf_counter() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            outcomes.append(await stream_once(client))

    async with async_client(collector_url, clients) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return Throughput(clients, elapsed, outcomes)


@dataclass
class Held(Streams):
    """Streams opened all at once and held open by a slow provider."""

    outcomes: list[StreamOutcome]
    seconds: float

    @property
    def peak_open(self) -> int:
        """Return the most streams that were between start and end at one moment."""
        edges: list[tuple[float, int]] = []
        for o in self.outcomes:
            if o.started is not None:
                edges += [(o.started, 1), (o.ended or o.started, -1)]
        peak = current = 0
        for _, step in sorted(edges):
            current += step
            peak = max(peak, current)
        return peak

    def latency(self, attribute: str, q: float) -> float:
        """Return the time from opening to an event, in ms, at percentile q."""
        values = [
            (getattr(o, attribute) - o.opened) * 1000
            for o in self.outcomes
            if getattr(o, attribute) is not None
        ]
        return percentile(values, q)


async def held_streams(collector_url: str, count: int) -> Held:
    """Open ``count`` streams at once and read them all to their end."""
    async with async_client(collector_url, count + 10) as client:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(stream_once(client) for _ in range(count)))
        return Held(list(outcomes), time.perf_counter() - started)


def set_stub(stub_url: str, **script: Any) -> None:
    """Tell the stub what to answer next."""
    check(httpx.post(f"{stub_url}/control", json=script, timeout=10))


# -- reporting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Everything a run produced."""

    command: str
    machine: Machine
    samples: int
    overhead: Overhead
    throughput: Throughput
    held: Held
    total_seconds: float
    load_average: float


def _errors(errors: Counter[str]) -> str:
    return ", ".join(f"{n}x {kind}" for kind, n in errors.most_common()) or "none"


def summary_lines(report: Report) -> list[str]:
    """Return the figures as markdown bullet points (also printed)."""
    o, t, h = report.overhead, report.throughput, report.held
    added50 = o.added(50)
    verdict = "met" if added50 < OVERHEAD_TARGET_MS else "MISSED"
    held_verdict = (
        "met" if h.completed == len(h.outcomes) and h.peak_open >= HELD_STREAMS else "MISSED"
    )
    median = statistics.median
    return [
        f"- **Overhead per non-stream run** ({report.samples} sequential runs, each paired with "
        f"a direct call to the stub, after {WARMUP} warm-up pairs): run p50 "
        f"{percentile(o.run_ms, 50):.1f} ms / p95 {percentile(o.run_ms, 95):.1f} ms; direct "
        f"call p50 {percentile(o.direct_ms, 50):.1f} ms / p95 "
        f"{percentile(o.direct_ms, 95):.1f} ms; **added by the collector: p50 {added50:.1f} ms, "
        f"p95 {o.added(95):.1f} ms** (target p50 < {OVERHEAD_TARGET_MS:.0f} ms: {verdict}).",
        f"- Where the added time goes (medians over {len(o.pre_process_ms)} of the records): "
        f"version lookup and rendering {median(o.pre_process_ms or [0]):.1f} ms; provider call "
        f"as the collector saw it {median(o.llm_call_ms or [0]):.1f} ms; recorded latency "
        f"{median(o.recorded_latency_ms or [0]):.1f} ms; the rest of the run's "
        f"{percentile(o.run_ms, 50):.1f} ms is HTTP, routing and auth (the record's insert "
        "runs behind the answer). For reference, logging one record "
        f"(`POST /v1/requests`: HTTP, auth and an insert acknowledged once stored, interleaved with "
        f"the runs) took p50 {percentile(o.log_ms, 50):.1f} ms / p95 "
        f"{percentile(o.log_ms, 95):.1f} ms.",
        f"- **Stream throughput**: {t.clients} clients streaming back to back for "
        f"{t.seconds:.1f} s: {t.completed} streams completed, "
        f"**{t.completed / t.seconds:.1f} runs/s**; errors: {_errors(t.errors)}.",
        f"- **Held streams**: {len(h.outcomes)} opened at once ({HELD_CHUNKS} chunks "
        f"{HELD_CHUNK_DELAY} s apart each): {h.completed} completed, peak "
        f"{h.peak_open} open at the same moment, errors: {_errors(h.errors)}; time to the "
        f"start event p50 {h.latency('started', 50):.0f} ms / p95 "
        f"{h.latency('started', 95):.0f} ms, to the first chunk p50 "
        f"{h.latency('first_chunk', 50):.0f} ms / p95 {h.latency('first_chunk', 95):.0f} ms; "
        f"all done in {h.seconds:.1f} s (target 200+ held without errors: {held_verdict}).",
    ]


def markdown(report: Report) -> str:
    """Return the generated block of the docs section."""
    lines = [
        *generated_head(BEGIN_MARK, report.machine, report.command),
        f"- Whole run: {report.total_seconds:.0f} s; 1-minute load average when the measuring "
        f"began: {report.load_average:.2f}",
        "",
        *summary_lines(report),
        "",
        END_MARK,
    ]
    return "\n".join(lines)


SECTION_INTRO = """\
A collector started as its own process (`promptrail serve`, embedded store) whose
`OPENAI_BASE_URL` points at the zero-latency OpenAI wire-format stub of
`promptrail.testing` (its own process too), driven over real HTTP. The overhead is a run's latency at the client minus a
direct call to the stub with the same messages, in sequential pairs on keep-alive connections.
Stream throughput: 32 clients run streams back to back. Held streams: 200 streams opened at
once while the stub spaces its chunks out, so all of them are open together. Targets (from the
issue): under 5 ms p50 added per non-stream run; 200+ concurrent streams held without errors.
All processes share the machine's 2 cores, the load generator included.

Why the overhead target is missed: a run does two things in the store that a direct call to the
provider does not. It reads the version it runs (latest, number or label: a ClickHouse point read,
about 5 ms on an idle machine, with no in-process cache yet), and it stores its record before it
answers, so that `GET /v1/requests/{id}` finds the record at once. On the embedded store that
insert goes through the request log's group commit (one insert for all the records of a 20 ms
window), so a run waits on average half the window plus the insert itself. The reference line
below (`POST /v1/requests`) measures that wait on its own. What would bring a run under 5 ms:
an in-process version cache invalidated exactly on every write of the prompt (prompts and labels
change through this collector, or through another one sharing the store, which needs a
notification), and acknowledging the run before its record is durable (giving up
read-your-writes, which the issue asks for). Both are outside the runs code and are left as
follow-ups.

Rerun, and rewrite the figures below:

```bash
.venv/bin/python benchmarks/runs.py --write-docs
```
"""


def write_docs(report: Report) -> None:
    """Replace the generated block of the runs section (creating what is missing)."""
    write_block(SECTION_HEADING, SECTION_INTRO, markdown(report), BEGIN_MARK, END_MARK)


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--samples", type=int, default=300, help="paired runs measured for the overhead [300]"
    )
    parser.add_argument(
        "--stream-seconds", type=float, default=20.0, help="stream throughput phase [20]"
    )
    parser.add_argument(
        "--held", type=int, default=HELD_STREAMS, help="streams held open at once [200]"
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the figures into docs/benchmarks.md"
    )
    parser.add_argument("--serve-stub", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.samples < 1 or args.stream_seconds <= 0 or args.held < 1:
        parser.error("--samples, --stream-seconds and --held must be positive")
    return args


def command_line(args: argparse.Namespace) -> str:
    """Return the command that reproduces this run's figures."""
    parts = [".venv/bin/python", "benchmarks/runs.py"]
    if args.samples != 300:
        parts += ["--samples", str(args.samples)]
    if args.stream_seconds != 20.0:
        parts += ["--stream-seconds", str(args.stream_seconds)]
    if args.held != HELD_STREAMS:
        parts += ["--held", str(args.held)]
    return " ".join(parts)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def create_prompt(collector_url: str) -> None:
    """Create the prompt every run uses."""
    body = {
        "name": PROMPT,
        "template": TEMPLATE,
        "model": "gpt-4o-mini",
        "parameters": {"temperature": 0},
    }
    headers = {"Authorization": f"Bearer {API_KEY}"}
    check(httpx.post(f"{collector_url}/v1/prompts", json=body, headers=headers, timeout=60), 201)


def run(args: argparse.Namespace, data_dir: Path) -> Report:
    """Start the stub and the collector, measure, stop; return the report."""
    started = time.perf_counter()
    print(f"starting the stub and the collector (data in {data_dir})", flush=True)
    with stub_and_collector(data_dir) as (stub_url, collector_url):
        create_prompt(collector_url)
        load_average = os.getloadavg()[0]
        set_stub(stub_url, reply=REPLY)
        print(f"overhead: {args.samples} paired runs (+{WARMUP} warm-up)", flush=True)
        overhead = measure_overhead(stub_url, collector_url, args.samples)
        print(f"  added p50 {overhead.added(50):.1f} ms, p95 {overhead.added(95):.1f} ms")
        print(f"stream throughput: {STREAM_CLIENTS} clients, {args.stream_seconds:.0f} s")
        throughput = asyncio.run(
            stream_throughput(collector_url, STREAM_CLIENTS, args.stream_seconds)
        )
        print(f"  {throughput.completed / throughput.seconds:.1f} runs/s", flush=True)
        slow_reply = " ".join(f"word{i}" for i in range(HELD_CHUNKS))
        set_stub(stub_url, reply=slow_reply, chunk_delay=HELD_CHUNK_DELAY)
        print(f"held streams: {args.held} at once", flush=True)
        held = asyncio.run(held_streams(collector_url, args.held))
        print(f"  {held.completed} completed, peak {held.peak_open} open", flush=True)
    return Report(
        command=command_line(args),
        machine=Machine.current(),
        samples=args.samples,
        overhead=overhead,
        throughput=throughput,
        held=held,
        total_seconds=time.perf_counter() - started,
        load_average=load_average,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with --serve-stub, be the stub); return the exit status."""
    args = parse_args(argv)
    if args.serve_stub is not None:
        serve_stub(args.serve_stub)
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    workdir = Path(tempfile.mkdtemp(prefix="promptrail-bench-runs-"))
    try:
        report = run(args, workdir / "data")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = "\n".join(summary_lines(report))
    finish(summary, report.total_seconds, partial(write_docs, report) if args.write_docs else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
