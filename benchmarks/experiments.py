"""Benchmark of experiments: the service's own time per result, and comparisons of big ones.

Command::

    .venv/bin/python benchmarks/experiments.py [--items 1000] [--compare-items 10000]
        [--stub-latency-ms 0,100] [--write-docs]

It starts the zero-latency OpenAI stub and a collector (``promptrail serve`` on a fresh
temporary data directory), as ``benchmarks/runs.py`` does, then measures:

1. **An experiment on the service**: ``--items`` items, concurrency 8, one ``contains``
   evaluator. The stub's own time is measured first (sequential direct calls); a result's
   service time is its run's latency as the collector recorded it minus the stub's p50
   (p50, p95), and the whole experiment's wall time * 8 / items minus the stub's p50 is the
   per-result share of everything else (evaluation, the result's and the scores' inserts).
   Also: when the first result was readable. Once per ``--stub-latency-ms`` value (default
   0 and 100): at 0 the eight runs queue behind each other for the 2 cores, so a run's
   latency is mostly the other seven's work (a throughput figure); a stub that answers after
   a model-like delay leaves the cores free between answers, and the figure is the service's
   own time on a result. The collector's CPU time per result (whole process, and its
   event-loop thread), read from /proc around the experiment, is the figure that moves least
   with what else the machine runs.
2. **Comparisons**: two experiments run by the client (``task: client``) of
   ``--compare-items`` results each, posted 1,000 at a time; then ``GET
   /v1/experiments/compare`` (the summary and the first page of 50 items) and its second page
   (by cursor), and ``GET /v1/experiments/{id}``, each 20 times: p50 and p95.

Targets (issue 33): the service's own time per result p50 ≤ 5 ms at concurrency 8; a
10,000-item comparison's summary p95 ≤ 300 ms and a page ≤ 100 ms. ``--write-docs`` writes
the figures into the "Experiments" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from _harness import check
from _report import Machine, finish, generated_head, write_block
from runs import API_KEY, PROMPT, REPLY, _terminate, percentile, set_stub, stub_and_collector

from promptrail.collector.runtime_file import read_runtime

SECTION_HEADING = "## Experiments (`benchmarks/experiments.py`)"
BEGIN_MARK = "<!-- benchmarks/experiments.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/experiments.py: end generated figures -->"
CONCURRENCY = 8
REPEAT = 20


def timed(api: httpx.Client, path: str, **params: Any) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    body: dict[str, Any] = check(api.get(path, params=params)).json()
    return (time.perf_counter() - started) * 1000, body


def stub_p50(stub_url: str, samples: int = 200) -> float:
    """The stub's own time per call (sequential direct calls on a keep-alive connection)."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hi"}]}
    times = []
    with httpx.Client(base_url=stub_url, timeout=60) as direct:
        for _ in range(samples):
            started = time.perf_counter()
            check(direct.post("/v1/chat/completions", json=body))
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def bench_dataset(api: httpx.Client, items: int) -> None:
    """The prompt and the ``bench`` dataset of ``items`` items the service experiments run."""
    check(api.post("/v1/prompts", json={"name": PROMPT, "template": "Say {x}",
                                        "model": "gpt-4o-mini"}), 201)  # fmt: skip
    check(api.post("/v1/datasets", json={"name": "bench"}), 201)
    for start in range(0, items, 1000):
        batch = [{"id": f"i{n:06d}", "input_variables": {"x": n}, "expected_output": REPLY}
                 for n in range(start, min(items, start + 1000))]  # fmt: skip
        check(api.post("/v1/datasets/bench/items", json={"items": batch}), 201)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """The CPU time (user + system) of a process and of its main thread (the collector's
    event loop), seconds, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")

    def read(path: str) -> float:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    return read(f"/proc/{pid}/stat"), read(f"/proc/{pid}/task/{pid}/stat")


def service_experiment(
    api: httpx.Client, stub_url: str, items: int, latency_ms: float = 0.0, pid: int | None = None
) -> dict[str, float]:
    """One experiment over the ``bench`` dataset, the stub answering after ``latency_ms``.

    With the collector's ``pid``, also its CPU time per result (whole process and event-loop
    thread): unlike the wall figures it does not move with what else the machine runs.
    """
    set_stub(stub_url, first_byte_delay=latency_ms / 1000)
    stub = stub_p50(stub_url, samples=200 if latency_ms < 10 else 20)
    cpu_before = cpu_seconds(pid) if pid else (math.nan, math.nan)
    started = time.perf_counter()
    made = check(api.post("/v1/experiments", json={
        "dataset": "bench", "prompt": PROMPT, "concurrency": CONCURRENCY,
        "evaluators": [{"type": "contains"}]}), 201).json()["data"]  # fmt: skip
    first_seen = None
    while True:
        data = check(api.get(f"/v1/experiments/{made['id']}")).json()["data"]
        if first_seen is None and data["counts"]["done"] > 0:
            first_seen = time.perf_counter() - started
        if data["status"] != "running":
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    cpu_after = cpu_seconds(pid) if pid else (math.nan, math.nan)
    latencies: list[float] = []
    cursor = None
    while True:
        page = check(api.get(f"/v1/experiments/{made['id']}/results",
                             params={"limit": 100, **({"cursor": cursor} if cursor else {})}))  # fmt: skip
        body = page.json()
        latencies += [r["latency_ms"] for r in body["data"] if r["latency_ms"] is not None]
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            break
    own = [latency - stub for latency in latencies]
    return {
        "items": items,
        "latency_ms": latency_ms,
        "status_completed": float(data["status"] == "completed"),
        "errors": data["counts"]["errors"],
        "stub_p50_ms": stub,
        "wall_s": wall,
        "results_per_s": items / wall,
        "own_p50_ms": percentile(own, 50),
        "own_p95_ms": percentile(own, 95),
        "share_per_result_ms": wall * 1000 * CONCURRENCY / items - stub,
        "first_result_s": first_seen or float("nan"),
        # Includes serving the progress polls (5 a second), as a user watching would.
        "cpu_per_result_ms": (cpu_after[0] - cpu_before[0]) * 1000 / items,
        "loop_cpu_per_result_ms": (cpu_after[1] - cpu_before[1]) * 1000 / items,
    }


def comparison(api: httpx.Client, items: int) -> dict[str, float]:
    check(api.post("/v1/datasets", json={"name": "big"}), 201)
    for start in range(0, items, 1000):
        batch = [{"id": f"b{n:06d}", "input_variables": {"q": n}, "expected_output": "x"}
                 for n in range(start, min(items, start + 1000))]  # fmt: skip
        check(api.post("/v1/datasets/big/items", json={"items": batch}), 201)
    rng = random.Random(33)
    ids = []
    for _ in range(2):
        made = check(api.post("/v1/experiments", json={"dataset": "big", "task": "client"}), 201)
        experiment_id = made.json()["data"]["id"]
        for start in range(0, items, 1000):
            results = [
                {"item_id": f"b{n:06d}", "output": "an answer of a few words",
                 "scores": {"quality": rng.random(), "correct": rng.random() < 0.7},
                 "latency_ms": rng.random() * 100, "estimated_cost_usd": 0.0001}
                for n in range(start, min(items, start + 1000))
            ]  # fmt: skip
            check(api.post(f"/v1/experiments/{experiment_id}/results",
                           json={"results": results}), 201)  # fmt: skip
        ids.append(experiment_id)
        if len(ids) == 1:
            check(api.post(f"/v1/experiments/{experiment_id}/complete"))
    pair = {"base": ids[0], "candidate": ids[1], "limit": 50}

    def pages(first: list[float], second: list[float], single: list[float] | None) -> None:
        for _ in range(REPEAT):
            ms, body = timed(api, "/v1/experiments/compare", **pair)
            first.append(ms)
            ms, _ = timed(api, "/v1/experiments/compare", **pair,
                          cursor=body["pagination"]["next_cursor"])  # fmt: skip
            second.append(ms)
            if single is not None:
                single.append(timed(api, f"/v1/experiments/{ids[0]}")[0])

    # The candidate still running: every comparison is computed anew (nothing kept).
    computed: list[float] = []
    computed_page: list[float] = []
    pages(computed, computed_page, None)
    # Both finished: the comparison is computed once, then its pages come from memory.
    check(api.post(f"/v1/experiments/{ids[1]}/complete"))
    summary: list[float] = []
    second: list[float] = []
    single: list[float] = []
    pages(summary, second, single)
    return {
        "items": items,
        "computed_p50_ms": percentile(computed, 50),
        "computed_p95_ms": percentile(computed, 95),
        "computed_page_p50_ms": percentile(computed_page, 50),
        "computed_page_p95_ms": percentile(computed_page, 95),
        "compare_p50_ms": percentile(summary, 50),
        "compare_p95_ms": percentile(summary, 95),
        "page_p50_ms": percentile(second, 50),
        "page_p95_ms": percentile(second, 95),
        "get_p50_ms": percentile(single, 50),
        "get_p95_ms": percentile(single, 95),
    }


def summary_lines(
    machine: Machine, runs: list[dict[str, float]], compared: dict[str, float] | None
) -> list[str]:
    lines = [f"- Machine: {machine.line()}"]
    for run in runs:
        lines += [
            f"- Experiment on the service, the stub answering after {run['latency_ms']:.0f} ms: "
            f"{run['items']:.0f} items at concurrency {CONCURRENCY}, {run['errors']:.0f} errors, "
            f"{run['wall_s']:.1f} s ({run['results_per_s']:.0f} results/s); first result "
            f"readable after {run['first_result_s']:.2f} s; stub's own time per call p50 "
            f"{run['stub_p50_ms']:.2f} ms",
            f"  - Service's own time per result (run latency - stub p50): p50 "
            f"{run['own_p50_ms']:.2f} ms, p95 {run['own_p95_ms']:.2f} ms (target p50 ≤ 5 ms); "
            f"wall * {CONCURRENCY} / items - stub: {run['share_per_result_ms']:.2f} ms",
            f"  - Collector CPU time per result (progress polls included): "
            f"{run['cpu_per_result_ms']:.2f} ms, of which its event loop "
            f"{run['loop_cpu_per_result_ms']:.2f} ms",
        ]
    if not compared:
        return lines
    lines += [
        f"- Compare of two {compared['items']:.0f}-item experiments, one still running "
        "(computed at every read), summary + first page: "
        f"p50 {compared['computed_p50_ms']:.0f} ms, p95 {compared['computed_p95_ms']:.0f} ms "
        "(target p95 ≤ 300 ms); its second page: p50 "
        f"{compared['computed_page_p50_ms']:.0f} ms, p95 {compared['computed_page_p95_ms']:.0f} ms",
        f"- The same two, both finished (computed once, then kept): summary + first page p50 "
        f"{compared['compare_p50_ms']:.0f} ms, p95 {compared['compare_p95_ms']:.0f} ms; "
        f"second page p50 {compared['page_p50_ms']:.0f} ms, p95 "
        f"{compared['page_p95_ms']:.0f} ms (target ≤ 100 ms)",
        f"- GET of one {compared['items']:.0f}-result experiment (counts and summary): p50 "
        f"{compared['get_p50_ms']:.0f} ms, p95 {compared['get_p95_ms']:.0f} ms",
    ]
    return lines


def write_docs(lines: list[str], machine: Machine, command: str) -> None:
    block = "\n".join([*generated_head(BEGIN_MARK, machine, command), *lines[1:], "", END_MARK])
    intro = (
        "Experiments on the service against the stub (answering at once, and after a model-like "
        "delay), and comparisons of two "
        "big experiments run by the client; how they are computed: docs/architecture.md "
        '("Datasets and experiments").'
    )
    write_block(SECTION_HEADING, intro, block, BEGIN_MARK, END_MARK)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument(
        "--compare-items", type=int, default=10_000, help="0: no comparisons [10000]"
    )
    parser.add_argument(
        "--stub-latency-ms",
        default="0,100",
        help="the stub's answer times, one service experiment each (comma-separated) [0,100]",
    )
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.write_docs and not args.compare_items:
        parser.error("--write-docs writes the comparisons' figures too: give --compare-items")
    latencies = [float(ms) for ms in args.stub_latency_ms.split(",")]
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="promptrail-bench-experiments-"))
    machine = Machine.current()
    try:
        with stub_and_collector(workdir / "data") as (stub_url, collector_url):
            headers = {"Authorization": f"Bearer {API_KEY}"}
            running = read_runtime(workdir / "data")
            pid = running.pid if running is not None else None
            with httpx.Client(base_url=collector_url, headers=headers, timeout=300) as api:
                bench_dataset(api, args.items)
                runs = [service_experiment(api, stub_url, args.items, ms, pid) for ms in latencies]
                set_stub(stub_url)
                compared = comparison(api, args.compare_items) if args.compare_items else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lines = summary_lines(machine, runs, compared)
    command = "python benchmarks/experiments.py " + " ".join(sys.argv[1:])
    finish(
        "\n".join(lines),
        time.perf_counter() - started,
        partial(write_docs, lines, machine, command.strip()) if args.write_docs else None,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
