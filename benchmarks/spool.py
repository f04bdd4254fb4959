"""The disk spool during an outage (issue 34): what it absorbs, what it costs on disk, how fast
it drains once the collector is back, and the application's memory meanwhile.

    .venv/bin/python benchmarks/spool.py [--records 20000] [--threads 8] [--write-docs]

1. The collector is down (nothing listens on its port). ``--threads`` threads call an observed
   function as fast as they can, ``--records`` calls in all; timed until every record is in the
   spool (``stats()["spooled"]``): records/s absorbed. Then the spool's bytes per record, and
   the process's peak RSS growth against the capture's memory budget (64 MiB).
2. A real collector (``promptrail serve``) comes up at that address; a fresh
   ``promptrail.init`` replays the spool (``flush`` loops until no file is left): records/s
   replayed, and every record is counted once (``replayed`` == ``--records``).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

from _harness import clean_env, process, promptrail_command, wait_until
from _report import Machine, load_average, write_section

import promptrail
from promptrail import _runtime
from promptrail.testing import free_port

SECTION = "## Disk spool during an outage (`benchmarks/spool.py`)"
KEY = "pr-bench-spool-0123456789abcdef"


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def absorb(url: str, cache: Path, records: int, threads: int) -> dict[str, float]:
    """Capture ``records`` calls from ``threads`` threads with the collector down."""
    _runtime.reset_stats()
    promptrail.init(api_key=KEY, base_url=url, cache_dir=cache, flush_interval=0.05)
    work = promptrail.observe(name="work")(lambda question, n: f"answer {n} to {question}")
    question = "What is the capital of France? Answer in one word. " * 4
    per_thread = records // threads
    before = _rss_kib()
    started = time.perf_counter()

    def run(offset: int) -> None:
        for n in range(offset, offset + per_thread):
            work(question, n)

    workers = [threading.Thread(target=run, args=(i * per_thread,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    captured_seconds = time.perf_counter() - started
    total = per_thread * threads
    while promptrail.stats()["spooled"] + promptrail.stats()["dropped_total"] < total:
        time.sleep(0.01)
    seconds = time.perf_counter() - started
    stats = promptrail.stats()
    spool = Path(stats["spool"])
    disk = sum(f.stat().st_size for f in spool.glob("*.spool"))
    promptrail.shutdown()
    return {
        "records": total,
        "spooled": stats["spooled"],
        "dropped": stats["dropped_total"],
        "calls_per_s": total / captured_seconds,
        "absorbed_per_s": stats["spooled"] / seconds,
        "bytes_per_record": disk / max(1, stats["spooled"]),
        "rss_growth_mib": (_rss_kib() - before) / 1024,
    }


def replay(url: str, cache: Path, expected: int) -> dict[str, float]:
    """Start again with the collector up: time the spool's replay."""
    _runtime.reset_stats()
    started = time.perf_counter()
    promptrail.init(api_key=KEY, base_url=url, cache_dir=cache, flush_interval=0.05)
    while not promptrail.flush(timeout=30):
        if time.perf_counter() - started > 600:
            raise RuntimeError(f"replay did not finish: {promptrail.stats()}")
    seconds = time.perf_counter() - started
    stats = promptrail.stats()
    promptrail.shutdown()
    if stats["replayed"] != expected:
        raise RuntimeError(f"replayed {stats['replayed']} of {expected}: {stats}")
    return {"replayed": stats["replayed"], "replayed_per_s": stats["replayed"] / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    machine = Machine.current()
    with tempfile.TemporaryDirectory(prefix="promptrail-bench-spool-") as tmp:
        root = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        down = absorb(url, root / "cache", args.records, args.threads)
        print(f"collector down: {down}")
        data = root / "data"
        data.mkdir()
        command = [*promptrail_command(), "serve", "--port", str(port), "--data-dir", str(data)]
        env = clean_env(PROMPTRAIL_INIT_API_KEY=KEY)
        with process(command, env, data / "collector.log") as child:
            wait_until(f"{url}/health", "the collector", child, data / "collector.log")
            back = replay(url, root / "cache", int(down["spooled"]))
        print(f"collector back: {back}")
    lines = [
        SECTION,
        "",
        f"- Machine: {machine.line()}; load average at the end: {load_average()}",
        f"- Command: `.venv/bin/python benchmarks/spool.py --records {args.records} "
        f"--threads {args.threads}`",
        "",
        "| collector down | |",
        "|---|---|",
        f"| calls from {args.threads} threads | {down['records']:,} |",
        f"| calls/s the application made | {down['calls_per_s']:,.0f} |",
        f"| records/s the spool absorbed (until the last was on disk) | "
        f"{down['absorbed_per_s']:,.0f} |",
        f"| records spooled / dropped | {down['spooled']:,} / {down['dropped']:,} |",
        f"| bytes per record on disk | {down['bytes_per_record']:,.0f} |",
        f"| peak RSS growth (budget 64 MiB) | {down['rss_growth_mib']:.1f} MiB |",
        f"| **collector back**: records/s replayed by the next start | "
        f"{back['replayed_per_s']:,.0f} |",
        "",
    ]
    print("\n".join(lines))
    if args.write_docs:
        write_section("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
