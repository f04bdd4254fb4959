"""Soak: mixed traffic for minutes with the store stalled twice; what is lost, doubled or broken.

Command::

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--stall-seconds 45] [--write-docs]

It starts the OpenAI wire-format stub (``promptrail stub-provider``) and a collector on a fresh
embedded store (``promptrail serve`` with ``PROMPTRAIL_FAULT_INJECTION=1``, its runs going to
the stub), then runs, all at once and for ``--minutes``:

- **ingest** (two threads): batches of 100 records with client-chosen ids through
  ``POST /v1/requests/batch``, each retried with the same ids after the ``Retry-After`` of a
  503 or 429 until it is accepted; the ids of accepted batches are what must be stored;
- **capture** (one thread): ``@promptrail.observe`` calls through the SDK at its defaults,
  which honours ``Retry-After`` by itself;
- **reads** (one thread): list pages, search, a record's detail, analytics;
- **runs** (one thread): a prompt run through the stub, plain and streamed in turn;
- **exports** (one thread): an export of this soak's records, polled until done, downloaded.

Twice, at a third and at two thirds of the time, the store stalls for ``--stall-seconds``
(``benchmarks/_harness.py`` ``stall_store``: first its inserts fail with TOO_MANY_PARTS, then
the log's table is taken away), and is resumed. A stall window lasts from the stall until
``/health`` is ready again after the resume.

Reported: records lost (accepted ids not stored, and SDK records exported but not stored;
target 0), duplicates (an id listed twice; 0), answers of 500 or more outside the stall
windows (0) and inside them other than 503 (0), the collector's peak memory (its VmHWM) and
its RSS after each stall, and the time the collector took to be ready after each resume.
``--write-docs`` writes the figures into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import secrets
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _harness import (
    Collector,
    clean_env,
    collector,
    free_port,
    process,
    promptrail_command,
    resume_store,
    stall_store,
    wait_until,
)
from _report import Machine, load_average, status_kib, write_section

SECTION = "## Soak (`benchmarks/soak.py`)"
API_KEY = "pr-bench-soak-" + "0" * 30
BATCH = 100
PROMPT = "soak"


@dataclass
class Tally:
    """Every answer the soak got, by phase, plus what it must find stored at the end."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    accepted: set[str] = field(default_factory=set)
    retries: int = 0
    windows: list[tuple[float, float]] = field(default_factory=list)
    stalled_since: float | None = None

    def phase(self, at: float) -> str:
        """Whether an answer that came at ``at`` fell inside a stall window."""
        with self.lock:
            if self.stalled_since is not None and at >= self.stalled_since:
                return "stall"
            return "stall" if any(a <= at <= b for a, b in self.windows) else "normal"

    def note(self, kind: str, began: float, status: int) -> None:
        """Count one answer: in a stall if it was sent or answered within one."""
        inside = self.phase(began) == "stall" or self.phase(time.monotonic()) == "stall"
        phase = "stall" if inside else "normal"
        with self.lock:
            self.statuses[(phase, kind, status)] += 1


def retry_after(response: httpx.Response) -> float:
    try:
        return max(0.1, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def send(
    client: httpx.Client, tally: Tally, kind: str, method: str, url: str, **options: Any
) -> httpx.Response | None:
    """One request, counted; None when the connection failed (counted as status 0)."""
    began = time.monotonic()
    try:
        response = client.request(method, url, **options)
    except httpx.HTTPError:
        tally.note(kind, began, 0)
        return None
    tally.note(kind, began, response.status_code)
    return response


def ingest(
    client: httpx.Client, tally: Tally, run: str, worker: int, stop: threading.Event
) -> None:
    for batch_number in itertools.count():
        if stop.is_set():
            return
        ids = [f"req_soak{worker}x{batch_number}x{i}x{run}" for i in range(BATCH)]
        records = [
            {
                "id": record_id,
                "model": "gpt-4o-mini",
                "provider": "openai",
                "input_variables": {"text": f"soak record {record_id}"},
                "output": {"content": f"reply {secrets.token_hex(8)}"},
                "metadata": {"soak": run, "source": "batch"},
                "usage": {"prompt_tokens": 12, "completion_tokens": 5},
                "latency_ms": random.randint(50, 900),
            }
            for record_id in ids
        ]
        while True:  # the same batch, the same ids, until the collector takes it
            response = send(
                client, tally, "ingest", "POST", "/v1/requests/batch", json={"records": records}
            )
            if response is not None and response.status_code in (200, 201):
                rejected = response.json()["data"]["rejected"]
                refused = {ids[r["index"]] for r in rejected}
                with tally.lock:
                    tally.accepted.update(i for i in ids if i not in refused)
                break
            with tally.lock:
                tally.retries += 1
            wait = retry_after(response) if response is not None else 1.0
            if stop.wait(wait) and response is not None and response.status_code >= 500:
                # Stopping mid-stall: this batch was never accepted, so it is not owed.
                return
        stop.wait(0.2)


def capture(base_url: str, run: str, stop: threading.Event) -> dict[str, Any]:
    import promptrail

    promptrail.init(api_key=API_KEY, base_url=base_url)

    @promptrail.observe(name="soak-step", metadata={"soak": run, "source": "sdk"})
    def step(n: int) -> int:
        return n * 2

    for n in itertools.count():
        if stop.is_set():
            break
        step(n)
        time.sleep(0.01)
    promptrail.flush(timeout=120)
    stats = promptrail.stats()
    promptrail.shutdown()
    return stats


def reads(client: httpx.Client, tally: Tally, run: str, stop: threading.Event) -> None:
    while not stop.is_set():
        page = send(client, tally, "read", "GET", "/v1/requests", params={"metadata.soak": run})
        if page is not None and page.status_code == 200 and page.json()["data"]:
            one = random.choice(page.json()["data"])["id"]
            send(client, tally, "read", "GET", f"/v1/requests/{one}")
        send(client, tally, "read", "GET", "/v1/requests/search", params={"query": "soak record"})
        send(
            client,
            tally,
            "read",
            "GET",
            "/v1/requests/analytics",
            params={"metric": "cost", "group_by": "model"},
        )
        stop.wait(0.2)


def runs(client: httpx.Client, tally: Tally, stop: threading.Event) -> None:
    body = {"variables": {"topic": "soaks"}}
    for n in itertools.count():
        if stop.is_set():
            return
        if n % 2:
            began = time.monotonic()
            try:
                with client.stream(
                    "POST", f"/v1/prompts/{PROMPT}/run", json={**body, "stream": True}
                ) as response:
                    for _ in response.iter_lines():
                        pass
                tally.note("run", began, response.status_code)
            except httpx.HTTPError:
                tally.note("run", began, 0)
        else:
            send(client, tally, "run", "POST", f"/v1/prompts/{PROMPT}/run", json=body)
        stop.wait(0.5)


def exports(client: httpx.Client, tally: Tally, run: str, stop: threading.Event) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    while not stop.is_set():
        made = send(
            client,
            tally,
            "export",
            "POST",
            "/v1/requests/export",
            json={"format": "json", "filters": {"metadata": {"soak": run}}},
        )
        if made is None or made.status_code != 201:
            stop.wait(5)
            continue
        export_id = made.json()["data"]["export_id"]
        while not stop.is_set():
            status = send(client, tally, "export", "GET", f"/v1/requests/exports/{export_id}")
            state = (
                status.json()["data"]["status"]
                if status is not None and status.status_code == 200
                else ""
            )
            if state in ("completed", "failed"):
                outcomes[state] += 1
                if state == "completed":
                    send(
                        client, tally, "export", "GET", f"/v1/requests/exports/{export_id}/download"
                    )
                break
            stop.wait(1)
        stop.wait(15)
    return outcomes


def wait_ready(base_url: str, limit: float = 600.0) -> float:
    """Seconds until ``/health`` answers 200."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/health", timeout=10).status_code == 200:
                return time.monotonic() - began
        time.sleep(0.25)
    raise RuntimeError(f"the collector was not ready {limit:.0f} s after the store came back")


def stored_ids(client: httpx.Client, run: str, source: str) -> list[str]:
    """Every id the log lists for this soak's records of ``source`` (pages of 100)."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        params = {"metadata.soak": run, "metadata.source": source, "limit": 100}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/requests", params=params, timeout=60)
        page.raise_for_status()
        body = page.json()
        ids.extend(r["id"] for r in body["data"])
        cursor = body["pagination"].get("next_cursor")
        if not cursor:
            return ids


@contextlib.contextmanager
def servers(data_dir: Path) -> Iterator[tuple[Collector, str]]:
    """The provider stub and a collector whose runs go to it, with fault injection on."""
    stub_port = free_port()
    stub_url = f"http://127.0.0.1:{stub_port}"
    stub_log = data_dir / "stub.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [*promptrail_command(), "stub-provider", "--port", str(stub_port)]
    with process(command, clean_env(), stub_log) as stub:
        # Any answer below 500 means it listens (a GET of the chat route is a 405).
        wait_until(f"{stub_url}/v1/chat/completions", "the provider stub", stub, stub_log)
        with collector(
            data_dir / "store",
            API_KEY,
            PROMPTRAIL_FAULT_INJECTION="1",
            OPENAI_BASE_URL=f"{stub_url}/v1",
            OPENAI_API_KEY="sk-stub",
        ) as running:
            yield running, stub_url


def soak(minutes: float, stall_seconds: float, modes: list[str]) -> dict[str, Any]:
    run = secrets.token_hex(4)
    tally = Tally()
    stop = threading.Event()
    with (
        tempfile.TemporaryDirectory(prefix="promptrail-soak-") as tmp,
        servers(Path(tmp)) as (running, _),
    ):
        data_dir = Path(tmp) / "store"
        headers = {"Authorization": f"Bearer {API_KEY}"}
        clients = [
            httpx.Client(base_url=running.url, headers=headers, timeout=60) for _ in range(6)
        ]
        clients[0].post(
            "/v1/prompts",
            json={
                "name": PROMPT,
                "template": "Write a line about {topic}.",
                "model": "gpt-4o-mini",
            },
        ).raise_for_status()
        results: dict[str, Any] = {}
        jobs: list[tuple[str, Callable[[], Any]]] = [
            ("ingest-0", lambda: ingest(clients[0], tally, run, 0, stop)),
            ("ingest-1", lambda: ingest(clients[1], tally, run, 1, stop)),
            ("reads", lambda: reads(clients[2], tally, run, stop)),
            ("runs", lambda: runs(clients[3], tally, stop)),
            ("exports", lambda: exports(clients[4], tally, run, stop)),
            ("capture", lambda: capture(running.url, run, stop)),
        ]

        def keep(name: str, job: Callable[[], Any]) -> None:
            results[name] = job()

        threads = [threading.Thread(target=keep, args=job, name=job[0]) for job in jobs]
        pid = running.process.pid
        began = time.monotonic()
        for thread in threads:
            thread.start()
        total = minutes * 60
        stalls: list[dict[str, Any]] = []
        for number, mode in enumerate(modes, start=1):
            at = began + total * number / (len(modes) + 1)
            time.sleep(max(0.0, at - time.monotonic()))
            rss_before = status_kib("VmRSS", pid)
            with tally.lock:
                tally.stalled_since = time.monotonic()
            stall_store(running, data_dir, mode=mode)
            print(f"  stall {number} ({mode}) at {time.monotonic() - began:.0f} s", flush=True)
            time.sleep(stall_seconds)
            rss_stalled = status_kib("VmRSS", pid)
            resume_store(running, data_dir)
            ready = wait_ready(running.url)
            with tally.lock:
                tally.windows.append((tally.stalled_since, time.monotonic()))
                tally.stalled_since = None
            print(f"  resumed; ready after {ready:.1f} s", flush=True)
            stalls.append(
                {
                    "mode": mode,
                    "ready_s": ready,
                    "rss_before_mib": rss_before / 1024,
                    "rss_stalled_mib": rss_stalled / 1024,
                }
            )
        time.sleep(max(0.0, began + total - time.monotonic()))
        stop.set()
        for thread in threads:
            thread.join()
        wait_ready(running.url)
        peak_mib = status_kib("VmHWM", pid) / 1024
        batch_ids = stored_ids(clients[0], run, "batch")
        sdk_ids = stored_ids(clients[0], run, "sdk")
        for client in clients:
            client.close()
    sdk = results.get("capture", {})
    statuses = tally.statuses
    return {
        "minutes": minutes,
        "stall_seconds": stall_seconds,
        "accepted": len(tally.accepted),
        "stored": len(set(batch_ids)),
        "lost": len(tally.accepted - set(batch_ids)),
        "duplicates": len(batch_ids) - len(set(batch_ids)) + len(sdk_ids) - len(set(sdk_ids)),
        "sdk_captured": sdk.get("captured", 0),
        "sdk_exported": sdk.get("exported", 0),
        "sdk_dropped": sdk.get("dropped_total", 0),
        "sdk_stored": len(set(sdk_ids)),
        "retries": tally.retries,
        "requests": sum(statuses.values()),
        "normal_5xx": sum(
            n for (phase, _, s), n in statuses.items() if phase == "normal" and s >= 500
        ),
        "normal_4xx": sum(
            n for (phase, _, s), n in statuses.items() if phase == "normal" and 400 <= s < 500
        ),
        "normal_failed": sum(
            n for (phase, _, s), n in statuses.items() if phase == "normal" and s == 0
        ),
        "stall_503": sum(
            n for (phase, _, s), n in statuses.items() if phase == "stall" and s == 503
        ),
        "stall_other_5xx": sum(
            n
            for (phase, _, s), n in statuses.items()
            if phase == "stall" and ((s >= 500 and s != 503) or s == 0)
        ),
        "by_kind": {
            f"{phase} {kind} {status}": n for (phase, kind, status), n in sorted(statuses.items())
        },
        "exports": dict(results.get("exports", {})),
        "peak_rss_mib": peak_mib,
        "stalls": stalls,
    }


def markdown(result: dict[str, Any], machine: Machine, loads: tuple[str, str], command: str) -> str:
    stalls = "; ".join(
        f"{s['mode']}: ready {s['ready_s']:.1f} s after the resume, RSS {s['rss_before_mib']:.0f} → "
        f"{s['rss_stalled_mib']:.0f} MiB during it"
        for s in result["stalls"]
    )
    lines = [
        SECTION,
        "",
        "Mixed traffic with the store stalled twice (how: the docstring of `benchmarks/soak.py`).",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine.line()}  ",
        f"Date: {machine.date}  ",
        f"Load average (1 / 5 / 15 min): {loads[0]} before, {loads[1]} after",
        "",
        "| figure | value | target |",
        "|---|---:|---|",
        f"| records accepted (batch route) | {result['accepted']:,} | |",
        f"| records lost | **{result['lost']}** (SDK: {result['sdk_exported'] - result['sdk_stored']}) | 0 |",
        f"| duplicates | **{result['duplicates']}** | 0 |",
        f"| SDK: captured / exported / dropped / stored | {result['sdk_captured']:,} / {result['sdk_exported']:,} / {result['sdk_dropped']:,} / {result['sdk_stored']:,} | dropped 0 |",
        f"| requests sent (all routes) | {result['requests']:,} | |",
        f"| 5xx outside the stalls | **{result['normal_5xx']}** (connection failures: {result['normal_failed']}) | 0 |",
        f"| 4xx outside the stalls | {result['normal_4xx']} | |",
        f"| inside the stalls: 503 / any other 5xx or failure | {result['stall_503']:,} / **{result['stall_other_5xx']}** | only 503 |",
        f"| batches retried after a 503/429 | {result['retries']:,} | |",
        f"| exports completed / failed | {result['exports'].get('completed', 0)} / {result['exports'].get('failed', 0)} | |",
        f"| collector peak RSS (VmHWM) | {result['peak_rss_mib']:.0f} MiB | bounded |",
        "",
        f"Stalls of {result['stall_seconds']:.0f} s each: {stalls}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--stall-seconds", type=float, default=45.0)
    parser.add_argument("--stalls", default="fail,gone", help="stall modes, in order")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    before = load_average()
    result = soak(args.minutes, args.stall_seconds, args.stalls.split(","))
    after = load_average()
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.write_docs:
        command = f".venv/bin/python benchmarks/soak.py --minutes {args.minutes:g} --stall-seconds {args.stall_seconds:g} --stalls {args.stalls} --write-docs"
        write_section(markdown(result, Machine.current(), (before, after), command))
    failed = (
        result["lost"] or result["duplicates"] or result["normal_5xx"] or result["stall_other_5xx"]
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
