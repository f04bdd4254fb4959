"""The burst case of ``sdk_overhead.py``: 20,000 openai calls as fast as possible.

Each (tool, case) runs in a fresh process: one thread, 8 threads, or 200 asyncio tasks
(``AsyncOpenAI``) making ``--burst-calls`` chat calls against an in-process zero-latency
provider, with the tool at its own defaults:

- ``plain``: no instrumentation (the baseline the added time is measured against);
- ``promptrail``: ``promptrail.init()`` + ``instrument("openai")``, shipping to a live collector
  (``promptrail serve`` in its own process, storing every record in its embedded ClickHouse);
- ``langfuse`` (``langfuse.openai``), ``openllmetry`` (``opentelemetry-instrumentation-openai``
  with an SDK ``BatchSpanProcessor`` and the OTLP/HTTP exporter) and ``openinference``
  (``openinference-instrumentation-openai``, the same processor and exporter), exporting OTLP to
  a live receiver in its own process that counts the spans it is sent (their own backends are
  not part of this repository; the receiver answers at once, which favours them).

Records lost: calls minus records the collector took (promptrail) or spans the receiver got
(peers, per call as counted in a warm-up), after the tool's own flush. Peak RSS: the process's
high-water mark minus its RSS before the burst. Added time per call: the burst's wall time
minus the plain burst's, per call, and the p50 of the calls' own latencies minus plain's.

The peers live in a benchmark-only venv (they pin OpenTelemetry packages of their own)::

    python3 -m venv /tmp/peers-venv
    /tmp/peers-venv/bin/pip install openai httpx2 httpx wrapt pydantic msgspec \\
        starlette uvicorn opentelemetry-sdk opentelemetry-exporter-otlp-proto-http langfuse \\
        opentelemetry-instrumentation-openai openinference-instrumentation-openai

(starlette and uvicorn: the harness imports ``promptrail.testing``, whose wire stubs use them.)
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (
    MESSAGES,
    async_provider_client,
    call,
    collector,
    free_port,
    overhead_in_processes,
    process,
    provider_client,
    wait_until,
)
from _report import status_kib

SRC = Path(__file__).resolve().parent.parent / "src"
KEY = "pr-bench-burst-key"
TOOLS = ("plain", "promptrail", "langfuse", "openllmetry", "openinference")
PEERS = ("langfuse", "openllmetry", "openinference")
CASES = ("1 thread", "8 threads", "200 asyncio tasks")
WARM_UP = 50


# -- the receivers ----------------------------------------------------------------------------


@contextmanager
def live_collector() -> Iterator[str]:
    """``promptrail serve`` on a fresh data directory, in its own process."""
    with (
        tempfile.TemporaryDirectory(prefix="burst-collector-") as data,
        collector(Path(data), KEY) as served,
    ):
        yield served.url


class _SpanCounter(BaseHTTPRequestHandler):
    """OTLP/HTTP traces: count the spans of each export and answer at once."""

    spans = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        count = sum(
            len(scope.spans)
            for resource in request.resource_spans
            for scope in resource.scope_spans
        )
        with self.lock:
            type(self).spans += count
        self._answer(ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self) -> None:  # /count, /reset
        with self.lock:
            answer = type(self).spans
            if self.path == "/reset":
                type(self).spans = 0
        self._answer(str(answer).encode(), "text/plain")

    def _answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_span_counter(port: int) -> None:
    ThreadingHTTPServer(("127.0.0.1", port), _SpanCounter).serve_forever()


@contextmanager
def span_counter() -> Iterator[str]:
    """The OTLP receiver of the peers, in its own process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with process([sys.executable, __file__, "receiver", str(port)], os.environ) as child:
        wait_until(f"{url}/count", "the span counter", child)
        yield url


# -- one burst, in its own process ------------------------------------------------------------


def instrument(tool: str, collector: str, receiver: str) -> Callable[[], int]:
    """Set ``tool`` up at its defaults; return a function that flushes and counts what arrived."""
    if tool == "plain":
        return lambda: 0
    if tool == "promptrail":
        import promptrail

        promptrail.init(api_key=KEY, base_url=collector)
        promptrail.instrument("openai")

        def shipped() -> int:
            promptrail.flush(timeout=300)
            stats = promptrail.stats()
            print(json.dumps({"stats": stats}), file=sys.stderr)
            return int(stats["exported"])

        return shipped
    if tool == "langfuse":
        os.environ.update(
            LANGFUSE_PUBLIC_KEY="pk-bench",
            LANGFUSE_SECRET_KEY="sk-bench",
            LANGFUSE_BASE_URL=receiver,
            LANGFUSE_OTEL_TRACES_EXPORT_PATH="v1/traces",
        )
        from langfuse import get_client
        from langfuse.openai import openai  # noqa: F401  (patches the openai SDK)

        client = get_client()

        def received() -> int:
            client.flush()
            return int(httpx.get(f"{receiver}/count").text)

        return received
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{receiver}/v1/traces")))
    if tool == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor  # type: ignore
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    def exported() -> int:
        provider.force_flush(300_000)
        return int(httpx.get(f"{receiver}/count").text)

    return exported


def reset_high_water_mark() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    with suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


@contextmanager
def queue_watch(tool: str) -> Iterator[list[int]]:
    """promptrail's queue at its deepest (what its budget counts), sampled every 10 ms."""
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        from promptrail import _runtime

        pipeline = _runtime._pipeline
        shipper = pipeline.shipper if pipeline is not None else None
        while shipper is not None and not done.wait(0.01):
            held = shipper.queued_bytes + pipeline.exporter.pending_bytes  # type: ignore[union-attr]
            peak[0] = max(peak[0], held)

    watcher = threading.Thread(target=watch, daemon=True)
    if tool == "promptrail":
        watcher.start()
    try:
        yield peak
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()


def run_one(tool: str, case: str, calls: int, collector: str, receiver: str) -> dict[str, Any]:
    """The burst of ``case`` with ``tool``: calls' latencies, wall time, memory, what arrived."""
    if tool in PEERS:
        httpx.get(f"{receiver}/reset")
    arrived = instrument(tool, collector, receiver)
    client, aclient = provider_client(), async_provider_client()
    for _ in range(WARM_UP):
        call(client)
    per_call = 1.0
    if tool in PEERS:  # spans a call makes, counted once, then the count starts again
        per_call = arrived() / WARM_UP
        httpx.get(f"{receiver}/reset")
    elif tool == "promptrail":
        arrived()
        from promptrail import _runtime

        _runtime.reset_stats()
    timings: list[float] = []
    reset_high_water_mark()
    rss_before = status_kib("VmRSS")
    with queue_watch(tool) as queue_peak:
        began = time.perf_counter()
        if case == "1 thread":
            timings = timed_calls(client, calls)
        elif case == "8 threads":
            timings = in_threads(client, calls, 8)
        else:
            timings = asyncio.run(in_tasks(aclient, calls, 200))
        wall = time.perf_counter() - began
    peak = status_kib("VmHWM")
    got = arrived()
    expected = calls * per_call
    return {
        "tool": tool,
        "case": case,
        "calls": calls,
        "wall_s": wall,
        "p50_us": statistics.median(timings),
        "lost": 0 if tool == "plain" else round(max(0.0, expected - got) / per_call),
        "rss_before_mib": rss_before / 1024,
        "rss_growth_mib": (peak - rss_before) / 1024,
        "spans_per_call": per_call,
        "queue_peak_mib": queue_peak[0] / 2**20,
        "p99_us": sorted(timings)[int(len(timings) * 0.99)],
        "max_us": max(timings),
    }


def timed_calls(client: Any, calls: int) -> list[float]:
    timings = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        began = clock()
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        timings.append((clock() - began) / 1000)
    return timings


def in_threads(client: Any, calls: int, threads: int) -> list[float]:
    results: list[list[float]] = [[] for _ in range(threads)]
    workers = [
        threading.Thread(
            target=lambda i=i: results[i].extend(timed_calls(client, calls // threads))
        )
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [t for chunk in results for t in chunk]


async def in_tasks(aclient: Any, calls: int, tasks: int) -> list[float]:
    clock = time.perf_counter_ns

    async def task(count: int) -> list[float]:
        timings = []
        for _ in range(count):
            began = clock()
            await aclient.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
            timings.append((clock() - began) / 1000)
        return timings

    chunks = await asyncio.gather(*(task(calls // tasks) for _ in range(tasks)))
    return [t for chunk in chunks for t in chunk]


# -- the whole comparison ---------------------------------------------------------------------


def burst(calls: int, peers_python: str | None) -> list[dict[str, Any]]:
    """Every (tool, case) in a fresh process, one after another; the peers if their venv exists."""
    tools = [t for t in TOOLS if t not in PEERS or peers_python]
    results = []
    with live_collector() as collector, span_counter() as receiver:
        for case in CASES:
            for tool in tools:
                python = peers_python if tool in PEERS and peers_python else sys.executable
                done = subprocess.run(
                    [python, __file__, "one", tool, case, str(calls), collector, receiver],
                    capture_output=True,
                    text=True,
                    env=dict(os.environ, PYTHONPATH=str(SRC)),
                )
                if done.returncode != 0:
                    print(f"  {tool} / {case} failed:\n{done.stderr[-2000:]}", flush=True)
                    continue
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.append(result)
                print(f"  {describe(result)}", flush=True)
    add_overheads(results)
    return results


def describe(result: dict[str, Any]) -> str:
    return (
        f"{result['tool']:>13} / {result['case']:<17} {result['wall_s']:6.1f} s, "
        f"lost {result['lost']:>6,}, p50 {result['p50_us']:6.0f} µs, "
        f"RSS +{result['rss_growth_mib']:.0f} MiB"
        + (
            f", queue peak {result['queue_peak_mib']:.0f} MiB"
            if result["tool"] == "promptrail"
            else ""
        )
    )


def add_overheads(results: list[dict[str, Any]]) -> None:
    """Add each result's time per call over the plain run of its case."""
    plain = {r["case"]: r for r in results if r["tool"] == "plain"}
    for result in results:
        base = plain.get(result["case"])
        if base is None:
            continue
        result["added_wall_us"] = (result["wall_s"] - base["wall_s"]) / result["calls"] * 1e6
        result["added_p50_us"] = result["p50_us"] - base["p50_us"]


if __name__ == "__main__":
    if sys.argv[1] == "receiver":
        serve_span_counter(int(sys.argv[2]))
    else:
        _, _, tool, case, calls, collector, receiver = sys.argv
        print(json.dumps(run_one(tool, case, int(calls), collector, receiver)))


# -- the docs section -------------------------------------------------------------------------

HEADING = "## SDK burst (`benchmarks/sdk_overhead.py --burst`)"
BEGIN, END = "<!-- burst:begin -->", "<!-- burst:end -->"
INTRO = (
    "What capture does when the application is busy: 20,000 instrumented openai calls as fast "
    "as they go, and what every tool loses, costs and holds meanwhile (how: the docstring of "
    "`benchmarks/_burst.py`). Each line is a fresh process; the lines of a case ran one after "
    "another in one run, on a machine shared with other work (the load average is given)."
)


def run_burst_section(args: Any) -> None:
    """Measure the added time per call (plain, streaming) and the bursts; print, maybe write."""
    from _report import Machine, load_average, write_block

    peers = args.peers_python if Path(args.peers_python).exists() else None
    loads = [load_average()]
    print(f"load average before: {loads[0]}", flush=True)
    plain = overhead_in_processes(args.calls, args.processes, "own")
    stream = overhead_in_processes(args.calls, args.processes, "stream")
    print(
        f"added per call p50: {plain['added_p50']:.0f} µs (runs "
        f"{', '.join(f'{v:.0f}' for v in plain['added_runs'])}); streaming (24 events) "
        f"{stream['added_p50']:.0f} µs (runs {', '.join(f'{v:.0f}' for v in stream['added_runs'])})",
        flush=True,
    )
    results = burst(args.burst_calls, peers)
    loads.append(load_average())
    print(f"load average after: {loads[1]}", flush=True)
    if args.write_docs:
        block = section_block(args, Machine.current().line(), loads, plain, stream, results)
        write_block(HEADING, INTRO, block, BEGIN, END)


def section_block(
    args: Any,
    machine: str,
    loads: list[str],
    plain: dict[str, Any],
    stream: dict[str, Any],
    results: list[dict[str, Any]],
) -> str:
    from datetime import UTC, datetime

    lines = [
        BEGIN,
        f"Command: `.venv/bin/python benchmarks/sdk_overhead.py --burst --burst-calls "
        f"{args.burst_calls} --calls {args.calls} --processes {args.processes} --write-docs`  ",
        f"Machine: {machine}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Load average (1 / 5 / 15 min): {loads[0]} before, {loads[1]} after",
        "",
        "| promptrail, added per call (median of processes) | p50 | target |",
        "|---|---:|---|",
        f"| chat call | **{plain['added_p50']:.0f} µs** "
        f"({', '.join(f'{v:.0f}' for v in plain['added_runs'])}) | ≤ 30 µs |",
        f"| streamed chat call, 24 events | **{stream['added_p50']:.0f} µs** "
        f"({', '.join(f'{v:.0f}' for v in stream['added_runs'])}) | ≤ 60 µs |",
        "",
        f"{args.burst_calls:,} calls per case:",
        "",
        "| case | tool | records lost | added per call, wall / p50 "
        "| peak RSS growth (promptrail: queue at its deepest, MiB) | wall |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for result in results:
        added = (
            f"{result['added_wall_us']:.0f} / {result['added_p50_us']:.0f} µs"
            if result["tool"] != "plain"
            else f"(p50 {result['p50_us']:.0f} µs)"
        )
        lost = "" if result["tool"] == "plain" else f"{result['lost']:,}"
        bold = "**" if result["tool"] == "promptrail" else ""
        # promptrail's queue at its deepest, as its budget counts it, beside the RSS growth.
        queue = f" (queue {result['queue_peak_mib']:.0f})" if result["tool"] == "promptrail" else ""
        lines.append(
            f"| {result['case']} | {bold}{result['tool']}{bold} | {bold}{lost}{bold} | {added} | "
            f"{result['rss_growth_mib']:.0f} MiB{queue} | {result['wall_s']:.1f} s |"
        )
    lines += ["", END]
    return "\n".join(lines)
