"""What the playground adds to each cell over the provider's own time (issue 49, "Speed").

    .venv/bin/python benchmarks/playground.py [--runs 20] [--back-to-back]

A collector (``promptrail serve`` on a fresh data directory) calls an OpenAI stub
(``promptrail.testing``) that answers each request after 100 ms (``first_byte_delay``),
served in a process of its own (in this one its event loop would share the GIL with the
client reading the run's events) beside a timer that notes when each request arrives at the
stub and when its last byte leaves. Each run is 16 cells (a dataset's 16 items, one model, streamed),
so 2 waves of 8 at once; the client notes when each cell's ``end`` event arrives.

Per cell, the time the playground adds over the provider's own time is the cell's time in its
slot minus the stub's time for it: the time before its request reaches the stub (from the
run's request for the first wave; from the stub's answer to the wave-1 cell whose slot it took
for the second, so that cell's wrap-up is counted twice: a ceiling) plus the time from the
stub's last byte to the cell's ``end`` event at the client. Also: each cell's ``latency_ms``
as the collector records it minus the stub's delay and minus the stub's time, the time to the
``start`` event (plan and estimate), the run's wall time against the ideal (2 waves x 100 ms),
and the collector's CPU time per cell (its whole process, and its event loop's thread), which
unlike the latencies does not move with what else the machine runs.

Each run starts once the previous run's records are stored (a read of the log naming the run
waits for them, and checks they are all there), as a person's next run would; with
``--back-to-back`` a run starts as soon as the previous one's ``done`` event arrives, and its
dataset read waits for the previous run's insert on the store. The CPU figure counts the
records' insert, not the settling reads (their own CPU, measured apart, is taken out). Last,
the plan alone: the same body sent to ``POST /v1/playground/estimates``, which plans the run
(prompt, dataset items, routing, rendering, estimate) and calls nothing.

Target: at most 5 ms p50 added per cell. The budget check's own cost per call is measured by
benchmarks/connections.py ("admit").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _harness import check, collector
from _report import Machine, load_average
from starlette.types import Message, Receive, Scope, Send

from promptrail.testing import OpenAIStub, serve

API_KEY = "pr-bench-playground-" + "0" * 20
DELAY = 0.100
CELLS = 16
AT_ONCE = 8
WARMUP = 3
PLANS = 30
BODY = {
    "prompt": {"template": "Answer {q}", "model": "gpt-4o-mini"},
    "dataset": {"name": "bench", "limit": CELLS},
}


@dataclass
class StubTimer:
    """An ASGI wrapper of the stub: for each request, by the dataset item its body names, when
    it arrived and when its answer's last byte left (``time.perf_counter``)."""

    stub: OpenAIStub
    seen: dict[str, tuple[float, float]] = field(default_factory=dict)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrived = time.perf_counter()
        if scope["type"] == "http" and scope["path"] == "/__timings":
            # The benchmark's own read of the timings (the stub runs in its own process).
            taken = json.dumps(self.seen).encode()
            self.seen.clear()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": taken})
            return
        body = bytearray()

        async def receiving() -> Message:
            message = await receive()
            body.extend(message.get("body", b""))
            return message

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                text = body.decode(errors="replace")
                marker = text.find("item-")
                if marker >= 0:
                    self.seen[text[marker : marker + 7]] = (arrived, time.perf_counter())

        await self.stub.app(scope, receiving, sending)


def serve_stub_apart(port: int) -> None:
    """Serve the timed stub at ``port`` in this (child) process, until killed.

    Apart from the benchmark: in its process the stub's event loop would share the GIL with
    the client reading the run's events, and its timings would carry the client's work.
    """
    stub = OpenAIStub()
    stub.script.first_byte_delay = DELAY
    stub.url = f"http://127.0.0.1:{port}"
    with serve(StubTimer(stub), lifespan="off", port=port):
        threading.Event().wait()


class StubTimings:
    """The timings of the stub's process, read over HTTP."""

    def __init__(self, url: str) -> None:
        self._client = httpx.Client(base_url=url, timeout=10)
        self.seen: dict[str, tuple[float, float]] = {}

    def take(self) -> dict[str, tuple[float, float]]:
        """The requests timed since the last call."""
        got = check(self._client.get("/__timings")).json()
        self.seen.update({item: (a, b) for item, (a, b) in got.items()})
        return self.seen


def cpu_seconds(pid: int) -> tuple[float, float]:
    """The CPU time (user + system) of a process and of its main thread (the collector's
    event loop), seconds, from /proc: unlike the latencies it does not move with what else
    the machine runs."""
    tick = os.sysconf("SC_CLK_TCK")

    def read(path: str) -> float:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return read(f"/proc/{pid}/stat"), read(f"/proc/{pid}/task/{pid}/stat")


def cpu_of(pid: int, times: int, call: Callable[[], None]) -> tuple[float, float]:
    """The collector's CPU (process, event loop's thread) per ``call``, over ``times``."""
    before = cpu_seconds(pid)
    for _ in range(times):
        call()
    after = cpu_seconds(pid)
    return (after[0] - before[0]) / times, (after[1] - before[1]) / times


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/__timings", timeout=1)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class Run:
    """One run's timings, in seconds from the request."""

    id: str = ""
    start_event: float = 0.0
    done: float = 0.0
    ends: dict[str, float] = field(default_factory=dict)  # item -> end event
    latency_ms: dict[str, int] = field(default_factory=dict)  # item -> the cell's record


def one_run(client: httpx.Client, timer: StubTimings, items: dict[str, str]) -> tuple[Run, float]:
    """Run the 16 cells streamed; the client's timings and when the request was sent."""
    timer.take()
    timer.seen.clear()
    run = Run()
    sent = time.perf_counter()
    with client.stream("POST", "/v1/playground/runs", json={**BODY, "stream": True}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"run -> {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            now = time.perf_counter()
            event: dict[str, Any] = json.loads(line[5:])
            if event["type"] == "start":
                run.start_event = now - sent
                run.id = event["id"]
            elif event["type"] == "end":
                if event["status"] != "success":
                    raise RuntimeError(f"a cell failed: {event}")
                item = items[event["item_id"]]
                run.ends[item] = now
                run.latency_ms[item] = event["latency_ms"]
            elif event["type"] == "done":
                run.done = now - sent
    # The stub notes a request's last byte just after sending it: the client may read the
    # run's end first.
    deadline = time.monotonic() + 5
    while len(timer.take()) < CELLS and time.monotonic() < deadline:
        time.sleep(0.001)
    return run, sent


def settle(client: httpx.Client, run: Run) -> None:
    """Wait until the run's records are stored: a read of the log waits for the inserts
    behind it, and the records must all be there."""
    params = {
        "environment": "promptrail-playground",
        "metadata.playground_run_id": run.id,
        "limit": CELLS,
    }
    found = check(client.get("/v1/requests", params=params)).json()["data"]
    if len(found) != CELLS:
        raise RuntimeError(f"run {run.id}: {len(found)} records stored, not {CELLS}")


def added_per_cell(run: Run, sent: float, seen: dict[str, tuple[float, float]]) -> list[float]:
    """Each cell's time in its slot minus the stub's time for it (see the module's text)."""
    by_arrival = sorted(seen.items(), key=lambda kv: kv[1][0])
    first, second = by_arrival[:AT_ONCE], by_arrival[AT_ONCE:]
    freed = sorted(done for _, (_, done) in first)
    added = []
    for index, (item, (arrived, done)) in enumerate(by_arrival):
        slot = sent if index < AT_ONCE else freed[index - AT_ONCE]
        before = arrived - slot
        after = run.ends[item] - done
        added.append(before + after)
    assert len(first) + len(second) == CELLS
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--back-to-back",
        action="store_true",
        help="start each run as soon as the last one's done event arrives, while its records "
        "are still being stored (by default a run starts once they are)",
    )
    args = parser.parse_args()
    runs = args.runs
    port = free_port()
    stub_process = multiprocessing.get_context("spawn").Process(
        target=serve_stub_apart, args=(port,), daemon=True
    )
    stub_process.start()
    stub_url = f"http://127.0.0.1:{port}"
    wait_for(stub_url)
    timer = StubTimings(stub_url)
    added: list[float] = []
    recorded: list[float] = []
    over_delay: list[float] = []
    starts: list[float] = []
    walls: list[float] = []
    provider: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"OPENAI_BASE_URL": f"{stub_url}/v1", "OPENAI_API_KEY": "sk-bench"}
        with collector(Path(tmp) / "data", API_KEY, **settings) as served:
            client = httpx.Client(base_url=served.url, headers={"X-API-Key": API_KEY}, timeout=60)
            check(client.post("/v1/datasets", json={"name": "bench"}), 201)
            made = [{"input_variables": {"q": f"item-{n:02d}"}} for n in range(CELLS)]
            check(client.post("/v1/datasets/bench/items", json={"items": made}), 201)
            listed = check(client.get("/v1/datasets/bench/items", params={"limit": 100}))
            items = {i["id"]: i["input_variables"]["q"] for i in listed.json()["data"]}
            pid = served.process.pid
            for n in range(WARMUP + runs):
                if n == WARMUP:
                    cpu_before = cpu_seconds(pid)
                run, sent = one_run(client, timer, items)
                if not args.back_to_back:
                    settle(client, run)
                if n < WARMUP:
                    continue
                seen = dict(timer.seen)
                added.extend(added_per_cell(run, sent, seen))
                for item, (arrived, done) in seen.items():
                    provider.append(done - arrived)
                    recorded.append(run.latency_ms[item] / 1e3 - (done - arrived))
                    over_delay.append(run.latency_ms[item] / 1e3 - DELAY)
                starts.append(run.start_event)
                walls.append(run.done)
            cpu_after = cpu_seconds(pid)
            stub_process.kill()
            # The settling reads are the benchmark's, not the runs': their own CPU, measured
            # alone (nothing left to wait for), is taken out of the runs' figure.
            reads = 0 if args.back_to_back else runs
            read_cpu = cpu_of(pid, PLANS, lambda: settle(client, run))
            # The plan alone: the estimate route makes a run's plan and calls nothing.
            plans: list[float] = []

            def plan() -> None:
                began = time.perf_counter()
                check(client.post("/v1/playground/estimates", json=BODY))
                plans.append(time.perf_counter() - began)

            plan_cpu = cpu_of(pid, PLANS, plan)
            client.close()
    ms = 1e3
    cells = runs * CELLS
    cpu_cell = (cpu_after[0] - cpu_before[0] - reads * read_cpu[0]) / cells
    loop_cell = (cpu_after[1] - cpu_before[1] - reads * read_cpu[1]) / cells
    ideal = 2 * DELAY
    print(f"Machine: {Machine.current().line()}")
    print(
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {runs} runs of {CELLS} cells "
        f"({AT_ONCE} at once), stub answering after {DELAY * ms:.0f} ms, "
        + ("back to back" if args.back_to_back else "each once the last one's records are stored")
        + f"; load average {load_average()}"
    )
    print(
        f"the collector's CPU per cell: {cpu_cell * ms:.2f} ms (all threads), "
        f"{loop_cell * ms:.2f} ms (the event loop's thread)"
    )
    print(
        f"the plan alone (POST /v1/playground/estimates, same body): p50 "
        f"{percentile(plans, 50) * ms:.1f} ms, p95 {percentile(plans, 95) * ms:.1f} ms; CPU "
        f"{plan_cpu[0] * ms:.2f} ms (all threads), {plan_cpu[1] * ms:.2f} ms (event loop)"
    )
    print(
        f"the stub's own time per request: p50 {percentile(provider, 50) * ms:.1f} ms, "
        f"p95 {percentile(provider, 95) * ms:.1f} ms"
    )
    print(
        f"added per cell over the stub's time: p50 {percentile(added, 50) * ms:.2f} ms, "
        f"p95 {percentile(added, 95) * ms:.2f} ms (target p50 <= 5 ms)"
    )
    print(
        f"a cell's recorded latency_ms minus the stub's delay: p50 "
        f"{percentile(over_delay, 50) * ms:.1f} ms, p95 {percentile(over_delay, 95) * ms:.1f} ms"
    )
    print(
        f"a cell's recorded latency_ms minus the stub's time: p50 "
        f"{percentile(recorded, 50) * ms:.2f} ms, p95 {percentile(recorded, 95) * ms:.2f} ms"
    )
    print(
        f"time to the start event (plan and estimate): p50 {statistics.median(starts) * ms:.1f} "
        f"ms, p95 {percentile(starts, 95) * ms:.1f} ms"
    )
    print(
        f"run wall time: p50 {statistics.median(walls) * ms:.1f} ms, p95 "
        f"{percentile(walls, 95) * ms:.1f} ms, ideal {ideal * ms:.0f} ms (2 waves of 8)"
    )


if __name__ == "__main__":
    main()
