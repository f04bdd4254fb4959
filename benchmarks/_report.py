"""What the benchmark scripts share: the machine they ran on, random text for their data, and
writing docs/benchmarks.md.

Each script owns one ``## `` section of the docs file. A script rewrites only what it
measured: either the block between its two markers, or, for sections without markers,
everything from the heading up to the first hand-written ``### `` part (kept as it is).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
DOCS_HEADER = """# Benchmarks

Speed is measured here, never asserted in tests: timing assertions are flaky on shared CI
machines and say nothing about the machine they ran on. Each section names the script, the
command that reruns it and the machine its figures come from.
"""


@dataclass(frozen=True)
class Machine:
    """Where the figures come from."""

    cpus: int
    memory_gib: float
    cpu_model: str
    python: str
    chdb: str
    date: str
    probe_ms: float

    @classmethod
    def current(cls) -> Machine:
        """Describe this machine, now."""
        return cls(
            cpus=len(os.sched_getaffinity(0)),
            memory_gib=_meminfo_kib("MemTotal") / 1024 / 1024,
            cpu_model=_cpu_model(),
            python=platform.python_version(),
            chdb=_version("chdb"),
            date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            probe_ms=cpu_probe_ms(),
        )

    def line(self) -> str:
        """One line for a docs section: CPUs, memory, Python, chDB and the CPU probe."""
        return (
            f"{self.cpus} CPUs ({self.cpu_model}), {self.memory_gib:.1f} GiB memory, "
            f"Python {self.python}, chDB {self.chdb}, CPU probe {self.probe_ms:.0f} ms"
        )


def cpu_probe_ms() -> float:
    """The best of 5 timings of one fixed piece of pure-Python work (JSON and arithmetic), ms.

    This virtual machine's speed drifts from hour to hour with no load of its own and no
    steal time counted (the same plain openai call took 448, 629 and 729 µs on three runs),
    so each run says how fast the machine was: figures of two runs compare only at similar
    probes.
    """
    payload = {"messages": [{"role": "user", "content": "x" * 200, "n": i} for i in range(200)]}
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(40):
            json.loads(json.dumps(payload))
        total = 0
        for i in range(300_000):
            total += i * i % 7
        best = min(best, time.perf_counter() - began)
    return best * 1000


def load_average() -> str:
    """The load average over 1, 5 and 15 minutes, as a docs line shows it."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def status_kib(field: str, pid: int | str = "self") -> int:
    """A memory figure of a process from /proc (``VmRSS``, ``VmHWM``…), in KiB; 0 if gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    return 0


def cpu_busy(window: float = 5.0) -> float:
    """Return how busy the machine's CPUs were over ``window`` seconds, 0-1 (all CPUs)."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle

    total_0, idle_0 = sample()
    time.sleep(window)
    total_1, idle_1 = sample()
    spent = total_1 - total_0
    return 1.0 - (idle_1 - idle_0) / spent if spent else 0.0


def wait_quiet(limit: float = 0.15, max_seconds: float = 900.0) -> tuple[float, float]:
    """Wait until the machine is quiet: CPUs under ``limit`` busy over 5 s.

    A store just loaded keeps merging its fresh parts for a while; reads measured then say
    more about the merges than about the reads. Returns (seconds waited, last busy share);
    gives up after ``max_seconds`` and says so on stdout.
    """
    started = time.monotonic()
    while True:
        busy = cpu_busy()
        waited = time.monotonic() - started
        if busy < limit:
            return waited, busy
        if waited > max_seconds:
            print(f"  still {busy:.0%} busy after {waited:.0f} s: measuring anyway", flush=True)
            return waited, busy
        print(f"  waiting for a quiet machine: {busy:.0%} busy", flush=True)


def _meminfo_kib(key: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    return 0


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def generated_head(begin: str, machine: Machine, command: str) -> list[str]:
    """Return the first lines of a generated block: its marker, then machine, date and command."""
    return [
        begin,
        "",
        f"- Machine: {machine.line()}",
        f"- Date: {machine.date}",
        f"- Command: `{command}`",
    ]


def random_words(rng: random.Random, words: Sequence[str], length: int) -> list[str]:
    """Return words drawn from ``words`` until, joined by spaces, they reach ``length``."""
    out: list[str] = []
    total = 0
    while total < length:
        word = rng.choice(words)
        out.append(word)
        total += len(word) + 1
    return out


def latency_table(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The markdown table of read latencies: a row per operation (its p50, p95 and samples)."""
    return [
        "| operation | p50 ms | p95 ms | samples |",
        "|---|---:|---:|---:|",
        *[
            f"| {r['operation']} | {r['p50']:.1f} | {r['p95']:.1f} | {r['samples']} |"
            for r in results
        ],
    ]


def finish(summary: str, total_seconds: float, write_docs: Callable[[], None] | None) -> None:
    """Print a run's figures and how long it took; write them into the docs when asked."""
    print()
    print(summary)
    print(f"\nwhole run: {total_seconds:.0f} s")
    if write_docs is not None:
        write_docs()
        print(f"wrote {DOCS.relative_to(DOCS.parent.parent)}")


def write_block(
    heading: str, intro: str, block: str, begin: str, end: str, path: Path = DOCS
) -> None:
    """Replace the generated block (``begin`` .. ``end``) of a section, creating what is missing."""
    text = path.read_text() if path.exists() else DOCS_HEADER
    if heading not in text:
        text = f"{text.rstrip()}\n\n{heading}\n\n{intro}\n{block}\n"
    elif begin in text and end in text:
        before, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1]
        text = before + block + after
    else:
        # The section exists without markers: replace it up to the next section.
        before, rest = text.split(heading, 1)
        following = rest.find("\n## ")
        after = rest[following:] if following >= 0 else "\n"
        text = f"{before}{heading}\n\n{intro}\n{block}\n{after}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_section(section: str, path: Path = DOCS) -> None:
    """Replace a section's measured part; its hand-written ``### `` parts stay.

    ``section`` starts with the section's ``## `` heading line.
    """
    heading = section.split("\n", 1)[0]
    text = path.read_text() if path.exists() else DOCS_HEADER
    section = section.rstrip("\n") + "\n"
    if heading in text:
        before, _, rest = text.partition(heading)
        following = rest.find("\n## ")
        old = rest if following < 0 else rest[:following]
        notes = old.find("\n### ")
        if notes >= 0:
            section += old[notes:].rstrip("\n") + "\n"
        text = before + section + (rest[following:] if following >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
