"""SDK overhead under a black-box harness: each configuration in a fresh process, as a user
would measure it, with the shipper really encoding and posting beside the calls.

    .venv/bin/python benchmarks/sdk_blackbox.py [--rounds 3] [--calls 20000] [--warmup 2000]

Every configuration runs in a process of its own: the official ``openai`` client with
``http_client=httpx2.Client(transport=...)`` (openai 3.x takes httpx2's client), the transport
answering in process, at once, a fixed chat completion (or a fixed 24-event SSE stream for the
streamed case); 2,000 warm-up calls, then 20,000 timed ones, each timed alone (p50, p95, p99).
Configurations: ``bare`` (nothing instrumented), ``promptrail`` (``promptrail.init`` against a
local sink server, a separate process that answers every batch as the collector does, so the
shipper encodes, compresses and posts for real beside the calls) and, when the benchmark-only
venv ``.bench-venv-sdk`` has them, the peers at their defaults: Langfuse's openai integration,
OpenInference's openai instrumentor and OpenLLMetry's (``opentelemetry-instrumentation-openai``),
the latter two with an OpenTelemetry SDK BatchSpanProcessor exporting OTLP to the same sink.
The peers run in that venv beside a ``bare`` of their own: each added time is a
configuration's p50 minus the p50 of ``bare`` in the same interpreter and the same round.

The machine is shared: bare and instrumented processes alternate within each round, and the
figure reported is the median over the rounds: each round's added p50 and added CPU per call
(against the bare process of the same round, whose p50 is printed too) beside the median.
Streamed calls take 7 rounds (``--stream-rounds``) of 5,000 timed calls: their fresh
processes differ from each other by more than capture adds, and a median of 3 moved by tens
of µs from run to run. Beside the median, the table gives its 90% bootstrap interval over
the run's own rounds: how far another run's median could land. ``--fixed-layout`` runs round
n's two processes with ``PYTHONHASHSEED=n`` and the address space's randomisation off
(``setarch -R``), so a run draws the same process layouts as the run before it.
``--with-idle`` adds ``promptrail-idle``: ``promptrail.init`` with nothing instrumented.

    .venv/bin/python benchmarks/sdk_blackbox.py --in-process [--stream-only] [--calls 3000]

``--in-process``: one process instead, promptrail shipping to the sink as above, the patched
``create`` and the SDK's own method under it (``__wrapped__``) called alternately, call by call,
on the same client; the calling thread's CPU per call (``time.thread_time_ns``) and wall time of
each, and their difference. Fresh processes differ from each other by tens of µs on a busy
machine; this pairing is the figure a before/after comparison can rest on at load. It
leaves out what a process pays beside its calls (the shipper's thread and its waits for the
GIL fall on both kinds of call alike).

    .venv/bin/python benchmarks/sdk_blackbox.py --turns [--stream-only] [--warmup 500]
        [--turn-groups 12] [--turn-count 50] [--turn-calls 50]

``--turns``: bare and promptrail in fresh processes alive side by side, taking turns of
``--turn-calls`` timed calls while the other is stopped (SIGSTOP: its shipper too), in pairs
(``--turn-groups``) whose added p50 the median takes: the machine's drift over seconds falls
on both processes of a pair alike, each process's own layout is what stays apart.

    .bench-venv-sdk: python3 -m venv .bench-venv-sdk && .bench-venv-sdk/bin/pip install
        openai==3.57.0 msgspec langfuse openinference-instrumentation-openai opentelemetry-sdk
        opentelemetry-exporter-otlp-proto-http opentelemetry-instrumentation-openai
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
PEERS_PYTHON = ROOT / ".bench-venv-sdk" / "bin" / "python"
OWN = ("bare", "promptrail")
PEERS = ("langfuse", "openinference", "openllmetry")

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


# The role, 22 pieces of text, the finish with the usage (as sdk_overhead.py's stream).
STREAM = (
    _chunk({"role": "assistant", "content": ""})
    + b"".join(_chunk({"content": f"word{i} "}) for i in range(22))
    + _chunk({}, "stop", usage={"prompt_tokens": 12, "completion_tokens": 22, "total_tokens": 34})
    + b"data: [DONE]\n\n"
)


# -- the sink: a separate process answering every export as its receiver would ---------------


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path
        if path.endswith("/batch"):  # promptrail's /v1/requests/batch, /v1/scores/batch
            status, body = 201, b'{"data":{"accepted":0,"rejected":[]}}'
        elif "ingestion" in path:  # Langfuse's legacy ingestion API
            status, body = 207, b'{"successes":[],"errors":[]}'
        else:  # OTLP/HTTP (protobuf): an empty ExportTraceServiceResponse
            status, body = 200, b""
        self.send_response(status)
        content_type = "application/x-protobuf" if status == 200 else "application/json"
        self.send_header("Content-Type", content_type)
        if status == 201:
            # As the collector names the codings it takes: the SDK posts zstd after its first.
            self.send_header("Accept-Encoding", "gzip, zstd")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_sink(port: int) -> None:
    """Answer exports on 127.0.0.1:``port`` until killed."""
    ThreadingHTTPServer(("127.0.0.1", port), _Sink).serve_forever()


# -- one configuration, in its own process ---------------------------------------------------


def _client(httpx2: Any, openai: Any) -> Any:
    def answer(request: Any) -> Any:
        if b'"stream":true' in request.content.replace(b" ", b""):
            return httpx2.Response(
                200, content=STREAM, headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(
            200, content=COMPLETION, headers={"content-type": "application/json"}
        )

    return openai.OpenAI(
        api_key="sk-bench",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


def _otel_provider(sink: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{sink}/v1/traces")))
    return provider


def _set_up(config: str, sink: str) -> Any:
    """Instrument as the configuration says; what to shut down afterwards."""
    if config in ("promptrail", "promptrail-idle"):
        import promptrail

        promptrail.init(api_key="pr-bench", base_url=sink)
        if config == "promptrail":
            promptrail.instrument("openai")
        return promptrail
    if config == "langfuse":
        os.environ.update(
            LANGFUSE_PUBLIC_KEY="pk-lf-bench",
            LANGFUSE_SECRET_KEY="sk-lf-bench",
            LANGFUSE_HOST=sink,
            LANGFUSE_BASE_URL=sink,
        )
        import langfuse.openai  # noqa: F401  (patches the openai module on import)
        from langfuse import get_client

        return get_client()
    if config in ("openinference", "openllmetry"):
        provider = _otel_provider(sink)
        if config == "openinference":
            from openinference.instrumentation.openai import OpenAIInstrumentor
        else:
            from opentelemetry.instrumentation.openai import (  # type: ignore[no-redef]
                OpenAIInstrumentor,
            )
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        return provider
    return None


def _one_call(create: Any, stream: bool) -> Callable[[], None]:
    """One chat call as a user's code makes it (a stream read to its end)."""

    def once() -> None:
        if stream:
            for _ in create(
                model="gpt-4o-mini",
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            ):
                pass
        else:
            create(model="gpt-4o-mini", messages=MESSAGES)

    return once


def run_one(config: str, stream: bool, calls: int, warmup: int, sink: str) -> dict[str, float]:
    """Time ``calls`` chat calls (after ``warmup``) under ``config``; p50/p95/p99 in µs."""
    import httpx2
    import openai

    handle = _set_up(config, sink)
    client = _client(httpx2, openai)
    create = client.chat.completions.create
    clock = time.perf_counter_ns
    once = _one_call(create, stream)

    for _ in range(warmup):
        once()
    timings, cpu = [], []
    cpu_clock = time.process_time_ns  # every thread of the process: the exporter's work too
    caller_began, process_began = time.thread_time_ns(), cpu_clock()
    for _ in range(calls):
        began, used = clock(), cpu_clock()
        once()
        cpu.append(cpu_clock() - used)
        timings.append(clock() - began)
    caller = time.thread_time_ns() - caller_began
    others = cpu_clock() - process_began - caller
    timings.sort()
    figures = {
        f"p{q}": timings[min(len(timings) - 1, len(timings) * q // 100)] / 1000
        for q in (50, 95, 99)
    }
    # The process's CPU time per call (the caller's and any exporter thread's), a figure other
    # processes' load on a shared machine moves far less than wall time.
    figures["cpu_p50"] = statistics.median(cpu) / 1000
    figures["cpu_mean"] = statistics.fmean(cpu) / 1000
    # Split by thread: the calling thread's, and the other threads' (an exporter's encoding
    # and posting, and the garbage collections they set off), per call.
    figures["caller_cpu"] = caller / calls / 1000
    figures["other_cpu"] = others / calls / 1000
    if config.startswith("promptrail"):
        handle.flush(timeout=30)
        stats = handle.stats()
        figures["exported"] = stats.get("exported", 0)
        figures["dropped"] = stats["dropped_total"]
        handle.shutdown()
    elif handle is not None:
        (getattr(handle, "flush", None) or handle.force_flush)()
    return figures


def run_turn_child(config: str, stream: bool, sink: str) -> None:
    """``--turns``' child: one configuration, calls run when the parent says (stdin), each
    timed alone; ``time N`` runs N timed calls, ``warm N`` N untimed ones, ``end`` reports."""
    import httpx2
    import openai

    handle = _set_up(config, sink)
    once = _one_call(_client(httpx2, openai).chat.completions.create, stream)
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    timings: list[int] = []
    cpu: list[int] = []

    for line in sys.stdin:
        command, _, count = line.strip().partition(" ")
        if command == "end":
            break
        for _ in range(int(count)):
            if command == "warm":
                once()
                continue
            began, used = clock(), cpu_clock()
            once()
            cpu.append(cpu_clock() - used)
            timings.append(clock() - began)
        print("ok", flush=True)
    figures = {
        "p50": statistics.median(timings) / 1000,
        "caller_cpu_p50": statistics.median(cpu) / 1000,
        "mean": statistics.fmean(timings) / 1000,
    }
    if config.startswith("promptrail"):
        handle.flush(timeout=30)
        figures["exported"] = handle.stats().get("exported", 0)
    print(json.dumps(figures), flush=True)
    os._exit(0)  # the shipper's last round is done (flush): no exit-time wait


def run_in_process(stream: bool, calls: int, warmup: int, sink: str) -> dict[str, float]:
    """Bare and captured calls alternated in one process; per call µs, p50 and mean."""
    import httpx2
    import openai

    import promptrail

    promptrail.init(api_key="pr-bench", base_url=sink)
    promptrail.instrument("openai")
    captured = _client(httpx2, openai).chat.completions.create
    bare = captured.__wrapped__  # the SDK's own method, on the same client
    kwargs: dict[str, Any] = {"model": "gpt-4o-mini", "messages": MESSAGES}
    if stream:
        kwargs.update(stream=True, stream_options={"include_usage": True})
    cpu_clock, clock = time.thread_time_ns, time.perf_counter_ns

    def once(create: Any) -> tuple[int, int]:
        began, used = clock(), cpu_clock()
        result = create(**kwargs)
        if stream:
            for _ in result:
                pass
        return cpu_clock() - used, clock() - began

    for _ in range(warmup):
        once(captured)
        once(bare)
    timed: dict[str, list[tuple[int, int]]] = {"bare": [], "promptrail": []}
    for number in range(calls):
        pair = (("bare", bare), ("promptrail", captured))
        for name, create in pair if number % 2 else pair[::-1]:
            timed[name].append(once(create))
    promptrail.shutdown()
    figures: dict[str, float] = {}
    for name, runs in timed.items():
        figures[f"{name}_cpu_p50"] = statistics.median(cpu for cpu, _ in runs) / 1000
        figures[f"{name}_cpu_mean"] = statistics.fmean(cpu for cpu, _ in runs) / 1000
        figures[f"{name}_p50"] = statistics.median(wall for _, wall in runs) / 1000
    for q in ("cpu_p50", "cpu_mean", "p50"):
        figures[f"added_{q}"] = figures[f"promptrail_{q}"] - figures[f"bare_{q}"]
    return figures


# -- the run -----------------------------------------------------------------------------------


def _child(
    python: Path | str,
    config: str,
    stream: bool,
    args: argparse.Namespace,
    sink: str,
    number: int = 0,
) -> dict[str, Any]:
    calls = args.stream_calls if stream and args.stream_calls else args.calls
    command = [
        str(python),
        str(HERE),
        "--child",
        config,
        "--calls",
        str(calls),
        "--warmup",
        str(args.warmup),
        "--sink",
        sink,
    ]
    if stream:
        command.append("--stream")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMPTRAIL_", "OPENAI_"))}
    env["PROMPTRAIL_CACHE_DIR"] = args.cache_dir
    if args.fixed_layout:
        env["PYTHONHASHSEED"] = str(number + 1)
        command = ["setarch", platform.machine(), "-R", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the parent imports nothing of promptrail's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _installed(python: Path, config: str) -> bool:
    module = {
        "bare": "openai",
        "langfuse": "langfuse.openai",
        "openinference": "openinference.instrumentation.openai",
        "openllmetry": "opentelemetry.instrumentation.openai",
    }[config]
    if not python.exists():
        return False
    found = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return found.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--stream-rounds",
        type=int,
        help="rounds of the streamed case (default: 7). Fresh processes of a streamed call "
        "differ from each other by more than capture adds (quiet-machine rounds of one run "
        "spread over 18-159 µs added): the median of 7 pairs, not of 3, is the figure",
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument(
        "--stream-calls",
        type=int,
        help="timed calls of the streamed case (default: 5,000 a process, --calls with "
        "--in-process); a streamed call takes several times a plain one's time, and the "
        "rounds' spread, not the calls', sets the figure's noise",
    )
    parser.add_argument("--own-only", action="store_true", help="bare and promptrail only")
    parser.add_argument("--plain-only", action="store_true", help="no streamed calls")
    parser.add_argument("--stream-only", action="store_true", help="only streamed calls")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="bare and promptrail alternated call by call in one process (--calls each)",
    )
    parser.add_argument(
        "--fixed-layout",
        action="store_true",
        help="run round n's two processes with PYTHONHASHSEED=n and the address space's "
        "randomisation off (setarch -R): a process's layout, not only its code, sets its "
        "speed by tens of µs, and this draws the same layouts again in every run",
    )
    parser.add_argument(
        "--with-idle",
        action="store_true",
        help="also promptrail-idle: promptrail.init (its shipper threads running, its modules "
        "imported) with nothing instrumented, to tell what the process pays before capturing",
    )
    parser.add_argument(
        "--turns",
        action="store_true",
        help="bare and promptrail in processes alive side by side, taking turns of "
        "--turn-calls timed calls (the other stopped): the machine's drift falls on both alike",
    )
    parser.add_argument("--turn-groups", type=int, default=12, help="fresh pairs of processes")
    parser.add_argument("--turn-count", type=int, default=50, help="turns each process takes")
    parser.add_argument("--turn-calls", type=int, default=50, help="timed calls a turn")
    parser.add_argument("--turn-child", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--in-process-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    parser.add_argument("--sink-server", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stream_rounds is None:
        args.stream_rounds = 7
    if args.stream_calls is None and not args.in_process:
        args.stream_calls = 5_000
    if args.fixed_layout and shutil.which("setarch") is None:
        parser.error("--fixed-layout needs setarch (util-linux)")
    if args.sink_server:
        serve_sink(args.sink_server)
        return
    if args.turn_child:
        run_turn_child(args.turn_child, args.stream, args.sink)
        return
    if args.in_process_child:
        print(json.dumps(run_in_process(args.stream, args.calls, args.warmup, args.sink)))
        return
    if args.child:
        figures = run_one(args.child, args.stream, args.calls, args.warmup, args.sink)
        print(json.dumps(figures))
        return

    sys.path.insert(0, str(HERE.parent))
    from _report import Machine, load_average

    if args.in_process:
        in_process(args)
        return
    if args.turns:
        turns(args)
        return
    peers = [] if args.own_only else [p for p in PEERS if _installed(PEERS_PYTHON, p)]
    missing = [] if args.own_only else [p for p in PEERS if p not in peers]
    # Each interpreter's configurations, bare first: an added time is against its own bare.
    own = (*OWN, "promptrail-idle") if args.with_idle else OWN
    plan: list[tuple[str, Path | str, str]] = [("own", sys.executable, c) for c in own]
    if peers:
        plan += [("peers", PEERS_PYTHON, c) for c in ("bare", *peers)]
    print(f"machine: {Machine.current().line()}; load before: {load_average()}")
    if missing:
        print(f"not installed in {PEERS_PYTHON.parent.parent.name}: {', '.join(missing)}")
    port = free_port()
    sink = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, str(HERE), "--sink-server", str(port)])
    results: dict[tuple[bool, str, str], list[dict[str, float]]] = {}
    try:
        time.sleep(1.0)
        with tempfile.TemporaryDirectory(prefix="sdk-blackbox-") as cache:
            args.cache_dir = cache
            kinds = (False,) if args.plain_only else (True,) if args.stream_only else (False, True)
            for stream in kinds:
                rounds = args.stream_rounds if stream else args.rounds
                for number in range(rounds):
                    # Bare and instrumented alternate; each round starts with another one.
                    order = plan[number % len(plan) :] + plan[: number % len(plan)]
                    for venv, python, config in order:
                        figures = _child(python, config, stream, args, sink, number)
                        results.setdefault((stream, venv, config), []).append(figures)
                        print(f"  {'stream' if stream else 'plain '} {venv}/{config}: {figures}")
                    print(round_line(results, stream, number))
    finally:
        server.terminate()
        server.wait()
    print(f"load after: {load_average()}")
    report(results, args, missing)


def in_process(args: argparse.Namespace) -> None:
    """``--in-process``: each kind of call in a process of its own, bare and captured paired."""
    from _report import Machine, load_average

    print(f"machine: {Machine.current().line()}; load before: {load_average()}")
    port = free_port()
    server = subprocess.Popen([sys.executable, str(HERE), "--sink-server", str(port)])
    try:
        time.sleep(1.0)
        kinds = (False,) if args.plain_only else (True,) if args.stream_only else (False, True)
        for stream in kinds:
            calls = args.stream_calls if stream and args.stream_calls else args.calls
            command = [sys.executable, str(HERE), "--in-process-child", "--calls", str(calls)]
            command += ["--warmup", str(args.warmup), "--sink", f"http://127.0.0.1:{port}"]
            env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTRAIL_")}
            with tempfile.TemporaryDirectory(prefix="sdk-blackbox-") as cache:
                env["PROMPTRAIL_CACHE_DIR"] = cache
                done = subprocess.run(
                    command + (["--stream"] if stream else []),
                    capture_output=True,
                    text=True,
                    env=env,
                )
            if done.returncode != 0:
                print(f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            f = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{'streamed' if stream else 'plain'}, {calls:,} pairs after {args.warmup:,}: "
                f"calling thread's CPU per call p50 bare {f['bare_cpu_p50']:.1f} µs, promptrail "
                f"{f['promptrail_cpu_p50']:.1f} µs: **added {f['added_cpu_p50']:+.1f} µs** "
                f"(mean {f['added_cpu_mean']:+.1f}); wall p50 added {f['added_p50']:+.1f} µs"
            )
    finally:
        server.terminate()
        server.wait()
    print(f"load after: {load_average()}")


def _turn(proc: subprocess.Popen[str], line: str) -> str:
    """Let ``proc`` run ``line`` (its turn), then stop it again; its answer."""
    assert proc.stdin is not None and proc.stdout is not None
    os.kill(proc.pid, signal.SIGCONT)
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer = proc.stdout.readline()
    if line != "end":
        os.kill(proc.pid, signal.SIGSTOP)
    return answer


def turns(args: argparse.Namespace) -> None:
    """``--turns``: bare and promptrail in fresh processes alive side by side, taking turns.

    Each group starts one process per configuration; they take turns of ``--turn-calls``
    timed calls, in an order that rotates, and only the one whose turn it is runs: the others
    are stopped (SIGSTOP, every thread: a shipper's round cannot land in another's turn). A
    drift of the machine's speed over seconds (other virtual machines on the host: a bare
    process's p50 moved by 100-400 µs from one process to the next, and within one process
    from one second to the next) then falls on both alike; what stays apart is each
    process's own layout, which the groups' median averages.
    """
    from _report import Machine, load_average

    stream = not args.plain_only
    configs = ("bare", "promptrail")
    print(f"machine: {Machine.current().line()}; load before: {load_average()}")
    port = free_port()
    sink = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, str(HERE), "--sink-server", str(port)])
    added: list[float] = []
    added_cpu: list[float] = []
    try:
        time.sleep(1.0)
        with tempfile.TemporaryDirectory(prefix="sdk-blackbox-") as cache:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTRAIL_")}
            env["PROMPTRAIL_CACHE_DIR"] = cache
            for group in range(args.turn_groups):
                command = [sys.executable, str(HERE), "--sink", sink, "--turn-child"]
                extra = ["--stream"] if stream else []
                procs = {
                    config: subprocess.Popen(
                        [*command, config, *extra],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        env=env,
                    )
                    for config in configs
                }
                for config in configs:
                    _turn(procs[config], f"warm {args.warmup}")
                for turn in range(args.turn_count):
                    first = (turn + group) % len(configs)
                    for config in configs[first:] + configs[:first]:
                        _turn(procs[config], f"time {args.turn_calls}")
                figures = {config: json.loads(_turn(procs[config], "end")) for config in configs}
                for proc in procs.values():
                    proc.wait()
                bare, own = figures["bare"], figures["promptrail"]
                added.append(own["p50"] - bare["p50"])
                added_cpu.append(own["caller_cpu_p50"] - bare["caller_cpu_p50"])
                print(
                    f"  group {group + 1}: bare p50 {bare['p50']:.0f} µs, promptrail "
                    f"{own['p50']:.0f} µs: added p50 {added[-1]:+.0f} µs, calling thread's "
                    f"CPU p50 {added_cpu[-1]:+.0f} µs, mean {own['mean'] - bare['mean']:+.0f} "
                    f"µs (exported {own.get('exported', 0):,})",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait()
    print(f"load after: {load_average()}")
    kind = "streamed" if stream else "plain"
    print(
        f"\n{kind}, {args.turn_groups} groups of fresh processes, {args.warmup:,} warm-up calls "
        f"each, then {args.turn_count} turns of {args.turn_calls} timed calls: promptrail's added "
        f"p50 {_median_and_rounds(added, bold=True, interval=True)}; calling thread's CPU p50 "
        f"{_median_and_rounds(added_cpu)}"
    )


def _paired(
    runs: list[dict[str, float]], bares: list[dict[str, float]], figure: str
) -> list[float]:
    """A configuration's ``figure`` minus its own interpreter's bare one, round by round
    (rounds where either failed left out)."""
    return [
        run[figure] - bare[figure]
        for run, bare in zip(runs, bares, strict=False)
        if "error" not in run and "error" not in bare
    ]


def median_interval(values: list[float], draws: int = 2_000) -> tuple[float, float]:
    """A 90% bootstrap interval of the median of ``values`` (the rounds): how far another
    run's median of as many rounds could land, from this run's own spread."""
    pick = random.Random(0).choices
    medians = sorted(statistics.median(pick(values, k=len(values))) for _ in range(draws))
    return medians[draws // 20], medians[draws - 1 - draws // 20]


def _median_and_rounds(values: list[float], bold: bool = False, interval: bool = False) -> str:
    """``+31 µs (+30, +46, +31)``: the median over the rounds, then each round's value (and,
    with ``interval``, the median's 90% bootstrap interval: ``+31 µs [+22, +46] (...)``)."""
    if not values:
        return ""
    median = f"{statistics.median(values):+.0f} µs"
    text = f"**{median}**" if bold else median
    if interval and len(values) > 2:
        low, high = median_interval(values)
        text += f" [{low:+.0f}, {high:+.0f}]"
    return f"{text} ({', '.join(f'{v:+.0f}' for v in values)})"


def round_line(
    results: dict[tuple[bool, str, str], list[dict[str, float]]], stream: bool, number: int
) -> str:
    """One round's figures as they come: each interpreter's bare p50, and each instrumented
    configuration's added p50 and added CPU per call (p50) against that round's bare."""
    parts = []
    for (kind, venv, config), runs in results.items():
        if kind != stream or config == "bare" or len(runs) <= number:
            continue
        bares = results.get((stream, venv, "bare"), [])
        if len(bares) <= number:
            continue
        run, bare = runs[number], bares[number]
        if "error" in run or "error" in bare:
            parts.append(f"{config}: failed")
            continue
        parts.append(
            f"{config}: bare p50 {bare['p50']:.0f} µs, added p50 {run['p50'] - bare['p50']:+.0f}"
            f" µs, added CPU p50 {run['cpu_p50'] - bare['cpu_p50']:+.0f} µs"
        )
    return f"  round {number + 1} ({'streamed' if stream else 'plain'}): " + "; ".join(parts)


def report(
    results: dict[tuple[bool, str, str], list[dict[str, float]]],
    args: argparse.Namespace,
    missing: list[str],
) -> None:
    """The table: each configuration's median p50/p95/p99 over the rounds; and, round by
    round against the bare process of the same round, the added p50 and added CPU per call,
    their median beside each round's value."""
    streamed = args.stream_calls or args.calls
    layout = ", each round's layout fixed (--fixed-layout)" if args.fixed_layout else ""
    print(
        f"\nmedian over {args.rounds} rounds ({args.stream_rounds} streamed) of fresh "
        f"processes, {args.warmup:,} warm-up + {args.calls:,} timed calls each "
        f"({streamed:,} streamed){layout}; [the added p50's 90% bootstrap interval]\n"
    )
    print(
        "| call | configuration | p50 (bare: each round) | p95 | p99 | added p50 (each round) "
        "| CPU per call, p50 / mean | added CPU p50 (each round) | added CPU mean "
        "| other threads' CPU per call |"
    )
    print("|---|---|---|---:|---:|---|---:|---|---:|---:|")
    for (stream, venv, config), runs in results.items():
        good = [run for run in runs if "error" not in run]
        kind = "streamed" if stream else "plain"
        if not good:
            print(f"| {kind} | {config} | failed: {runs[0].get('error')} | | | | | | | |")
            continue
        p = {
            q: statistics.median(run[q] for run in good)
            for q in ("p50", "p95", "p99", "cpu_p50", "cpu_mean", "other_cpu")
        }
        p50 = f"{p['p50']:.0f} µs"
        added = added_cpu = added_mean = ""
        if config == "bare":
            each = ", ".join(f"{run['p50']:.0f}" for run in good)
            p50 += f" ({each})"
        else:
            bares = results.get((stream, venv, "bare"), [])
            added = _median_and_rounds(_paired(runs, bares, "p50"), bold=True, interval=True)
            added_cpu = _median_and_rounds(_paired(runs, bares, "cpu_p50"))
            means = _paired(runs, bares, "cpu_mean")
            added_mean = f"{statistics.median(means):+.0f} µs" if means else ""
        name = config if venv == "own" else f"{config} (peers' venv)"
        print(
            f"| {kind} | {name} | {p50} | {p['p95']:.0f} µs | {p['p99']:.0f} µs "
            f"| {added} | {p['cpu_p50']:.0f} / {p['cpu_mean']:.0f} µs | {added_cpu} "
            f"| {added_mean} | {p['other_cpu']:.0f} µs |"
        )
    for peer in missing:
        print(f"| | {peer} | not installed | | | | | | | |")


if __name__ == "__main__":
    main()
