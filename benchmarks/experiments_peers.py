"""``run_experiment`` in the user's code beside Arize Phoenix's, the same work in the same run.

Command (the peer lives in the benchmark-only venv, as for ``benchmarks/peers_registry.py``)::

    .venv/bin/python benchmarks/experiments_peers.py [--items 1000] [--repeats 3] [--write-docs]

It starts the zero-latency OpenAI wire stub and a collector (``stub_and_collector`` of
``benchmarks/runs.py``, on a fresh temporary data directory) and a fresh ``phoenix serve``
(``benchmarks/peers_registry.py``'s ``phoenix``: SQLite, its own data directory, free ports).
Both get the same ``--items`` dataset (input ``{"q": n}``, the stub's fixed reply as the
expected output). Then, in fresh child processes, one after another and interleaved (each
round runs every mode once, so a change of load touches all of them alike):

- ``baseline``: a plain loop calling the task over the items, just before each tool's run, in
  that tool's venv's Python (promptrail's ``.venv``, the peer's ``.bench-venv``: interpreters
  and packages differ, so each tool is measured against the loop of its own interpreter);
- ``promptrail``: ``promptrail.init`` + ``instrument()`` (capture on, shipping to the
  collector), then ``promptrail.run_experiment(name, task, ["contains"], concurrency=1)``,
  timed until it returns (the experiment completed, the captured records flushed);
- ``phoenix``: ``Client().datasets.get_dataset`` then ``Client().experiments.run_experiment``
  with a ``contains`` callable (Phoenix has no built-in one in its client), its own tracing as
  it does by default (a span per task run and per evaluation, exported to the Phoenix server);
- ``phoenix + openinference``: the same with ``OpenAIInstrumentor`` on, so the provider call
  is traced too, as promptrail's capture does (skipped when the instrumentation is not
  installed in the benchmark venv).

The task is the same code in every mode (``TASK`` below): one chat completion through the
official ``openai`` SDK against the stub, returning its content. Imports, ``init`` and a
warm-up call happen before the clock starts. Added time per item = (wall - the baseline wall
paired with it) / items; each figure is the median over ``--repeats`` rounds (the order of
the tools turns each round). The target (issue 33): promptrail's added time per item ≤ ½ of Phoenix's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from _harness import check
from _report import Machine, finish, generated_head, load_average, write_block
from peers_registry import BENCH_VENV, phoenix
from runs import API_KEY, _terminate, stub_and_collector

SECTION_HEADING = "## run_experiment beside Phoenix (`benchmarks/experiments_peers.py`)"
BEGIN_MARK = "<!-- benchmarks/experiments_peers.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/experiments_peers.py: end generated figures -->"
DATASET = "peers-bench"
# The stub's default reply (promptrail.testing's Script.reply): every output matches it.
EXPECTED = "Hello from the stub provider."
# A pause after each tool's run: its server's work left over (spans, merges) ends first.
SETTLE = 3.0

# The task and the timing, the same text run by both interpreters (``python -c``). The
# argument vector: mode, stub URL, items, the tool's URL, the dataset name, a scratch dir.
TASK = """
import json, sys, time
import openai

mode, stub_url, items, tool_url, dataset, scratch = sys.argv[1:7]
items = int(items)
provider = openai.OpenAI(api_key="sk-bench", base_url=stub_url + "/v1", max_retries=0)


def answer(q):
    reply = provider.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"Answer question {q}."}]
    )
    return reply.choices[0].message.content
"""

WORKERS = {
    "baseline": """
answer(-1)  # warm-up: the connection to the stub
started = time.perf_counter()
for n in range(items):
    answer(n)
wall = time.perf_counter() - started
""",
    "promptrail": """
import promptrail
promptrail.init(api_key=API_KEY, base_url=tool_url, cache_dir=scratch)
promptrail.instrument()
client = promptrail.Client(api_key=API_KEY, base_url=tool_url)
answer(-1)  # warm-up: the connection to the stub (captured outside the experiment)
promptrail.flush()
started = time.perf_counter()
run = promptrail.run_experiment(
    dataset, lambda item: answer(item["input_variables"]["q"]), ["contains"],
    concurrency=1, client=client, progress=False,
)
wall = time.perf_counter() - started
assert len(run.results) == items, len(run.results)
assert all(r.get("scores", {}).get("contains") is True for r in run.results), run.results[:2]
# Capture was on: every result names the record of its provider call.
assert all(r.get("request_id") for r in run.results), run.results[:2]
promptrail.shutdown()
""",
    "phoenix": """
import contextlib, io
from phoenix.client import Client
if mode == "phoenix-openinference":
    from openinference.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument()
client = Client(base_url=tool_url)


def contains(output, expected):
    return expected["answer"].strip() in output.strip()


answer(-1)  # warm-up: the connection to the stub
started = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):  # its banner and links; the figures go to stdout
    ran = client.experiments.run_experiment(
        dataset=client.datasets.get_dataset(dataset=dataset),
        task=lambda input: answer(input["q"]),
        evaluators=[contains],
        print_summary=False,
    )
wall = time.perf_counter() - started
assert len(ran["task_runs"]) == items, len(ran["task_runs"])
scores = [e.result["score"] for e in ran["evaluation_runs"] if e.result]
assert len(scores) == items and all(s == 1 for s in scores), scores[:2]
""",
}
MODES = ("baseline", "promptrail", "phoenix", "phoenix-openinference")
LABELS = {
    "promptrail": "promptrail run_experiment",
    "phoenix": "Phoenix run_experiment",
    "phoenix-openinference": "Phoenix run_experiment + OpenAIInstrumentor",
}


def worker_source(mode: str) -> str:
    """The child's program for ``mode``: the shared task, then the mode's timed part."""
    body = WORKERS["phoenix" if mode.startswith("phoenix") else mode]
    tail = 'print(json.dumps({"wall": wall}))\n'
    return TASK + f"API_KEY = {API_KEY!r}\n" + body + tail


def run_child(python: Path, mode: str, args: Sequence[str]) -> float:
    """Run one timed child; return its wall time in seconds."""
    done = subprocess.run(
        [str(python), "-c", worker_source(mode), mode, *args],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("PROMPTRAIL_", "OPENAI_"))},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{mode} in {python} failed:\n{done.stderr[-3000:]}")
    wall: float = json.loads(done.stdout.strip().splitlines()[-1])["wall"]
    return wall


def load_promptrail(collector_url: str, items: int) -> None:
    """The dataset in promptrail: ``items`` items, 1,000 a post."""
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=collector_url, headers=headers, timeout=300) as api:
        check(api.post("/v1/datasets", json={"name": DATASET}), 201)
        for start in range(0, items, 1000):
            batch = [{"id": f"i{n:06d}", "input_variables": {"q": n}, "expected_output": EXPECTED}
                     for n in range(start, min(items, start + 1000))]  # fmt: skip
            check(api.post(f"/v1/datasets/{DATASET}/items", json={"items": batch}), 201)


def load_phoenix(phoenix_url: str, items: int) -> None:
    """The same dataset in Phoenix, through its REST upload (one post, as its client does)."""
    body = {
        "action": "create",
        "name": DATASET,
        "inputs": [{"q": n} for n in range(items)],
        "outputs": [{"answer": EXPECTED} for _ in range(items)],
        "metadata": [{} for _ in range(items)],
    }
    check(httpx.post(f"{phoenix_url}/v1/datasets/upload?sync=true", json=body, timeout=300))


def bench_venv_has(module: str) -> bool:
    """Whether the benchmark venv's Python imports ``module``."""
    probe = [str(BENCH_VENV / "python"), "-c", f"import {module}"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def measure(
    stub_url: str, collector_url: str, phoenix_url: str, items: int, repeats: int, scratch: Path
) -> dict[str, Any]:
    """Every mode once a round, ``repeats`` rounds; return walls, added times and loads.

    Each tool's run is paired with a plain loop in its own venv's Python just before it, and
    the order of the tools turns by one each round: a load that drifts, or a server still
    digesting the previous run's spans, falls on each of them alike.
    """
    traced = bench_venv_has("openinference.instrumentation.openai")
    tools = [m for m in MODES if m != "baseline" and (m != "phoenix-openinference" or traced)]
    venvs = {"promptrail": Path(sys.executable), "phoenix": BENCH_VENV / "python"}
    walls: dict[str, list[float]] = {}
    added: dict[str, list[float]] = {m: [] for m in tools}
    loads: list[float] = []
    for round_ in range(1, repeats + 1):
        turn = (round_ - 1) % len(tools)
        for mode in tools[turn:] + tools[:turn]:
            side = "promptrail" if mode == "promptrail" else "phoenix"
            url = collector_url if side == "promptrail" else phoenix_url
            rest = [stub_url, str(items), url, DATASET, str(scratch)]
            base = run_child(venvs[side], "baseline", rest)
            walls.setdefault(f"baseline ({side} venv)", []).append(base)
            wall = run_child(venvs[side], mode, rest)
            walls.setdefault(LABELS[mode], []).append(wall)
            added[mode].append((wall - base) / items * 1000)
            time.sleep(SETTLE)
        loads.append(os.getloadavg()[0])
        print(f"  round {round_}: load {loads[-1]:.2f}, " + ", ".join(
            f"{m} {added[m][-1]:.2f} ms/item" for m in added), flush=True)  # fmt: skip
    return {"items": items, "repeats": repeats, "walls": walls, "added": added, "loads": loads}


def summary_lines(machine: Machine, figures: dict[str, Any]) -> list[str]:
    """The figures as docs lines: machine, load, a table, and the target's ratio."""
    items, added = figures["items"], figures["added"]
    lines = [
        f"- Machine: {machine.line()}",
        f"- {items} items, sequential (concurrency 1 on both), median of {figures['repeats']} "
        f"rounds; 1-minute load average after each round: "
        + ", ".join(f"{v:.2f}" for v in figures["loads"]),
        "",
        "| run | wall, median s | added per item, median ms (each round) |",
        "|---|---:|---:|",
    ]
    for label, walls in figures["walls"].items():
        mode = next((m for m, name in LABELS.items() if name == label), None)
        cell = "(the reference)"
        if mode is not None:
            runs = ", ".join(f"{v:.2f}" for v in added[mode])
            cell = f"{statistics.median(added[mode]):.2f} ({runs})"
        lines.append(f"| {label} | {statistics.median(walls):.2f} | {cell} |")
    lines.append("")  # the table ends before the ratios' list
    ours = statistics.median(added["promptrail"])
    for mode in ("phoenix", "phoenix-openinference"):
        if mode in added:
            theirs = statistics.median(added[mode])
            ratio = ours / theirs if theirs > 0 else float("inf")
            lines.append(
                f"- promptrail's added time per item / {LABELS[mode]}'s: {ratio:.2f} "
                f"(target ≤ 0.5): {'met' if ratio <= 0.5 else 'NOT met'}"
            )
    return lines


def write_docs(lines: list[str], machine: Machine, command: str) -> None:
    """Write the figures into their section of docs/benchmarks.md."""
    block = "\n".join(
        [
            *generated_head(BEGIN_MARK, machine, command),
            f"- Load average (1 / 5 / 15 min) when written: {load_average()}",
            *lines[1:],
            "",
            END_MARK,
        ]
    )
    intro = (
        "`promptrail.run_experiment` in the user's code against Arize Phoenix's "
        "`run_experiment` (arize-phoenix server, arize-phoenix-client, in `.bench-venv`), the "
        "same task code (one chat completion through the `openai` SDK against the zero-latency "
        "wire stub), the same items and a `contains` evaluator, sequential on both. What "
        "differs: promptrail captures the provider call as a record (`instrument()`) and ships "
        "records and results to its collector (results in batches of 50, records by its "
        "background shipper, flushed before the experiment is completed); Phoenix by default "
        "traces a span per task run and per evaluation, exported one by one "
        "(`SimpleSpanProcessor`) to its server, and posts each run and each evaluation; the "
        "OpenInference row adds a span for the provider call, the work closest to "
        "promptrail's capture. Phoenix's timed window includes its `get_dataset` (promptrail's "
        "`run_experiment` reads the items itself); each tool runs in its own venv's Python and "
        "is compared with the plain loop in that Python."
    )
    write_block(SECTION_HEADING, intro, block, BEGIN_MARK, END_MARK)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args(argv)
    # The task needs the openai SDK in the peer's venv too (`make bench-peers` installs
    # arize-phoenix, whose client does not depend on it).
    if not (BENCH_VENV / "phoenix").exists() or not bench_venv_has("openai, phoenix.client"):
        print("Arize Phoenix (server, client) and openai are not all in .bench-venv: skipped")
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="promptrail-bench-experiments-peers-"))
    machine = Machine.current()
    print(f"load average at the start: {load_average()}", flush=True)
    try:
        (workdir / "phx").mkdir()
        with (
            stub_and_collector(workdir / "data") as (stub_url, collector_url),
            phoenix(workdir / "phx") as phoenix_url,
        ):
            load_promptrail(collector_url, args.items)
            load_phoenix(phoenix_url, args.items)
            figures = measure(
                stub_url, collector_url, phoenix_url, args.items, args.repeats, workdir
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lines = summary_lines(machine, figures)
    command = " ".join(["python benchmarks/experiments_peers.py", *sys.argv[1:]])
    writer = partial(write_docs, lines, machine, command) if args.write_docs else None
    finish("\n".join(lines), time.perf_counter() - started, writer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
