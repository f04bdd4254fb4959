"""Scores benchmark (issue 31): score ingest and the score reads at 1M records + 1M scores.

    .venv/bin/python benchmarks/scores.py [--records 1000000] [--write-docs]
    .venv/bin/python benchmarks/scores.py --records 100000           # a quick try
    .venv/bin/python benchmarks/scores.py --reuse --data-dir DIR     # reads of an earlier load
    .venv/bin/python benchmarks/scores.py --ids sdk                  # ids as the SDK makes them
    .venv/bin/python benchmarks/scores.py --reuse --data-dir DIR --gap  # a page over HTTP vs in process

Starts ``promptrail serve`` on a fresh data dir and loads, everything through the real HTTP
batch routes (no store inserts): ``--records`` records through ``POST /v1/requests/batch``
(the request-log benchmark's bodies, 200 prompts x 5 versions over 30 days) and as many
scores through ``POST /v1/scores/batch`` (1,000 a batch, the route's maximum): 60% numeric
``helpfulness`` in [0, 1], 30% boolean ``thumbs``, 10% categorical ``topic``, each on a
random record (so some records have several, a third none); 2% of the ids are repeated
later in the load with another value (a changed vote, a replacement). Both rates are taken
over the same client threads and printed side by side (issue 31: scores/s >= records/s).

Then, on the settled store, p50/p95 over one keep-alive connection of: a list filtered by
``score.helpfulness.min`` (and by ``.max``, by ``score.thumbs=true``), a record's detail with
its scores, and ``metric=score`` analytics of ``helpfulness`` by version, by prompt and by
day. ``--reuse`` measures the reads again on the store an earlier run loaded (that is how the
before/after figures of docs/benchmarks.md were taken: the second collector migrates the
first one's store).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _harness import clean_env, collector, process, wait_until
from _report import Machine, wait_quiet, write_section
from request_log import (
    KEY,
    PROMPTS,
    IngestResult,
    MemoryWatch,
    cpu_seconds,
    ingest,
    record_id,
)

from promptrail.testing import free_port

SECTION = "## Scores at scale (`benchmarks/scores.py`)"
NAMES = (("helpfulness", 0.6), ("thumbs", 0.9), ("topic", 1.0))
TOPICS = ["billing", "shipping", "account", "other"]
SCORE_BATCH = 1000  # the route's maximum (MAX_BATCH_SCORES)


def score_body(number: int, records: int, total: int, ids: str = "bench") -> bytes:
    """The JSON body of score batch ``number``: scores ``number*1000`` onwards."""
    rng = random.Random(10_000 + number)
    items = []
    for i in range(number * SCORE_BATCH, min((number + 1) * SCORE_BATCH, total)):
        draw = rng.random()
        # 2% of the scores replace an earlier id (a changed vote): same id, new value.
        sid = i if i < total // 50 or rng.random() >= 0.02 else rng.randrange(i)
        item: dict[str, Any] = {
            "id": f"sc_bench{sid:010d}",
            "request_id": record_id(random.Random(sid).randrange(records), ids),
            "source": "eval",
        }
        if draw < NAMES[0][1]:
            item.update(name="helpfulness", value=round(rng.random(), 3))
        elif draw < NAMES[1][1]:
            item.update(name="thumbs", value=rng.random() < 0.7)
        else:
            item.update(name="topic", value=rng.choice(TOPICS))
        items.append(item)
    return json.dumps({"scores": items}).encode()


def ingest_scores(
    base: str, records: int, total: int, workers: int, pid: int, ids: str = "bench"
) -> IngestResult:
    """Post ``total`` scores in batches of 1,000 from ``workers`` threads; time it."""
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    local = threading.local()  # one keep-alive connection per thread

    def post(number: int) -> int:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base, headers=headers, timeout=300)
        body = score_body(number, records, total, ids)
        response = local.client.post("/v1/scores/batch", content=body)
        while response.status_code == 503:  # the store is behind: as the SDK does
            time.sleep(float(response.headers.get("retry-after", "1")))
            response = local.client.post("/v1/scores/batch", content=body)
        response.raise_for_status()
        data = response.json()["data"]
        if data["rejected"]:
            raise RuntimeError(f"scores rejected: {data['rejected'][:3]}")
        if number % 100 == 99:
            print(f"  scored {(number + 1) * SCORE_BATCH:,}/{total:,}", flush=True)
        return int(data["accepted"])

    client_cpu, collector_cpu = time.process_time(), cpu_seconds(pid)
    began = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        accepted = sum(pool.map(post, range((total + SCORE_BATCH - 1) // SCORE_BATCH)))
    return IngestResult(
        time.perf_counter() - began,
        accepted,
        time.process_time() - client_cpu,
        cpu_seconds(pid) - collector_cpu,
    )


def measure(
    client: httpx.Client,
    label: str,
    make: Callable[[int], tuple[str, dict[str, Any]]],
    n: int,
    pid: int | None = None,
) -> dict[str, Any]:
    """p50/p95 of ``n`` requests after a few warm-ups; a request over the client's timeout
    ends the operation (the old code took minutes a request at 1M scores). ``pid``: the
    collector's, whose CPU per request is printed too (it stretches less than wall time
    on a loaded machine)."""
    times: list[float] = []
    cpu = 0.0
    try:
        for i in range(min(3, n)):
            path, params = make(i)
            client.get(path, params=params).raise_for_status()
        cpu = cpu_seconds(pid) if pid else 0.0
        for i in range(n):
            path, params = make(i)
            began = time.perf_counter()
            client.get(path, params=params).raise_for_status()
            times.append((time.perf_counter() - began) * 1000)
    except httpx.TimeoutException:
        print(f"  {label:<46} over {client.timeout.read} s: stopped", flush=True)
        return {"operation": label, "p50": None, "p95": None, "samples": len(times)}
    times.sort()
    result = {
        "operation": label,
        "p50": statistics.median(times),
        "p95": times[max(0, int(len(times) * 0.95) - 1)],
        "samples": n,
    }
    if pid:
        result["cpu_ms"] = (cpu_seconds(pid) - cpu) * 1000 / n
    used = f"   CPU {result['cpu_ms']:6.1f} ms/request" if pid else ""
    print(
        f"  {label:<46} p50 {result['p50']:8.1f} ms   p95 {result['p95']:8.1f} ms{used}",
        flush=True,
    )
    return result


def reads(
    base: str,
    records: int,
    samples: int,
    only: str = "",
    timeout: float = 120,
    ids: str = "bench",
    pid: int | None = None,
) -> list[dict[str, Any]]:
    """p50/p95 of the score reads of the log (and the collector's CPU per request, given
    its ``pid``)."""
    rng = random.Random(5)
    analytics = max(20, samples // 4)
    ops: list[tuple[str, Any, int]] = [
        (
            "list, score.helpfulness.min=0.9",
            lambda i: ("/v1/requests", {"score.helpfulness.min": "0.9"}),
            samples,
        ),
        (
            "list, score.helpfulness.min (random bound)",
            lambda i: ("/v1/requests", {"score.helpfulness.min": f"{rng.random():.2f}"}),
            samples,
        ),
        (
            "list, score.helpfulness.max=0.1 + prompt_name",
            lambda i: (
                "/v1/requests",
                {"score.helpfulness.max": "0.1", "prompt_name": rng.choice(PROMPTS)},
            ),
            samples,
        ),
        (
            "list, score.thumbs=true",
            lambda i: ("/v1/requests", {"score.thumbs": "true"}),
            samples,
        ),
        (
            "list, unfiltered (scores in the items)",
            lambda i: ("/v1/requests", {}),
            samples,
        ),
        (
            "detail with scores",
            lambda i: (f"/v1/requests/{record_id(rng.randrange(records), ids)}", {}),
            samples,
        ),
    ]
    for group in ("version", "prompt_name", "day"):
        ops.append(
            (
                f"analytics metric=score by {group}",
                lambda i, g=group: (
                    "/v1/requests/analytics",
                    {"metric": "score", "score_name": "helpfulness", "group_by": g},
                ),
                analytics,
            )
        )
    results = []
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=timeout
    ) as client:
        for label, make, count in ops:
            if any(part in label for part in only.split("|")):
                results.append(measure(client, label, make, count, pid))
    return results


def rate(result: IngestResult, what: str) -> str:
    return (
        f"{result.accepted:,} {what} in {result.elapsed:.1f} s = "
        f"**{result.accepted / result.elapsed:,.0f} {what}/s** "
        f"(collector CPU {result.collector_cpu:.1f} s)"
    )


def _target(operation: str) -> str:
    """The issue's p95 bound of an operation, if it names one."""
    if operation.startswith("list, score.helpfulness.min"):
        return "<= 50 ms"
    if operation.startswith("detail"):
        return "<= 20 ms"
    return "<= 200 ms" if operation == "analytics metric=score by version" else ""


def _ms(value: float | None) -> str:
    return "timed out" if value is None else f"{value:.1f}"


def write_docs(
    args: argparse.Namespace,
    records: IngestResult,
    scores: IngestResult,
    results: list[dict[str, Any]],
    peak: float,
    label: str,
) -> None:
    """Write this run's figures as the section's measured part (notes below stay)."""
    lines = [
        SECTION,
        "",
        f"Command: `.venv/bin/python benchmarks/scores.py --records {args.records}` ({label})  ",
        f"Machine: {Machine.current().line()}  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; embedded store (chDB), collector in "
        "its own process.",
        "",
        f"- Records ingest (`POST /v1/requests/batch`, 5,000 a batch): {rate(records, 'records')}.",
        f"- Scores ingest (`POST /v1/scores/batch`, 1,000 a batch): {rate(scores, 'scores')}.",
        f"- Collector RSS peak: {peak:.0f} MiB.",
        "",
        "| operation | p50 ms | p95 ms | samples | issue 31's p95 target |",
        "|---|---:|---:|---:|---|",
        *[
            f"| {r['operation']} | {_ms(r['p50'])} | {_ms(r['p95'])} | {r['samples']} | "
            f"{_target(r['operation'])} |"
            for r in results
        ],
        "",
    ]
    write_section("\n".join(lines))


GAP_PAGE = "/v1/requests"


def _gap_app(data_dir: Path) -> Any:
    """The collector's app on ``data_dir`` inside a wrapper that times what it serves and
    answers ``/_direct?bound=`` with the time of the same page built in process.

    ``/_direct`` runs what the route runs (the page, its scores, the page model as JSON) on
    a worker thread of the same event loop, so the two figures differ only by the HTTP path:
    the client, the socket, uvicorn, the middleware, the access check and FastAPI's response
    handling. ``/_served`` hands back the served times of the API pages since the last call.
    """
    import anyio

    from promptrail.collector.api.routes import requests as routes
    from promptrail.collector.app import create_app, open_services
    from promptrail.collector.config import Settings

    settings = Settings(data_dir=data_dir)
    opened = open_services(settings)
    services = opened[0]
    inner = create_app(settings, opened=opened)
    served: list[float] = []

    def page(bound: str) -> bytes:
        rows = services.requests.list_page(
            "default",
            20,
            None,
            metadata={},
            score_params=[("score.helpfulness.min", bound)],
        )
        scores = services.scores.summaries("default", [(r.id, r.trace_id) for r in rows.rows])
        body = routes.Page(
            data=[routes.RequestListItem.of_record(r, scores.get(r.id)) for r in rows.rows],
            pagination=routes.Pagination.of(rows.next_cursor),
        )
        return body.model_dump_json().encode()

    async def answer(send: Any, body: bytes) -> None:
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        if scope["path"] == "/_direct":
            bound = scope["query_string"].decode().removeprefix("bound=")
            began = time.perf_counter()
            await anyio.to_thread.run_sync(page, bound)
            await answer(send, json.dumps({"ms": (time.perf_counter() - began) * 1000}).encode())
            return
        if scope["path"] == "/_served":
            await answer(send, json.dumps(served).encode())
            served.clear()
            return
        began = time.perf_counter()

        async def timed(message: dict[str, Any]) -> None:
            await send(message)
            last = message["type"] == "http.response.body" and not message.get("more_body")
            if last and scope["path"] == GAP_PAGE:
                served.append((time.perf_counter() - began) * 1000)

        await inner(scope, receive, timed)

    return app


def gap_server(data_dir: Path, port: int) -> None:
    """Serve :func:`_gap_app` as ``promptrail serve`` serves the collector: the same process
    tuning, uvicorn's defaults (its access log included)."""
    import logging

    import uvicorn

    from promptrail.collector.tuning import tune_for_ingest

    logging.basicConfig(level=logging.INFO)
    tune_for_ingest()
    uvicorn.run(_gap_app(data_dir), host="127.0.0.1", port=port)


def _quantiles(times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"{statistics.median(ordered):6.1f} / {p95:6.1f}"


def gap(data_dir: Path, samples: int, rounds: int) -> None:
    """The same list page in process and over HTTP, pair by pair, on one served store.

    Each sample asks ``/_direct`` for the page built in process, then the page over HTTP
    (the client's time) with the same bound; the server's own time of each HTTP page is read
    back after the round. Bounds: ``0.9``, then the benchmark's random sequence (seed 5).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = data_dir / "gap.log"
    command = [sys.executable, __file__, "--gap-server", str(port), "--data-dir", str(data_dir)]
    env = clean_env()
    with process(command, env, log_path) as child:
        wait_until(f"{url}/health", "the gap server", child, log_path)
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            for label, bounds in (("min=0.9", None), ("random bound", random.Random(5))):
                for _ in range(3):
                    client.get(GAP_PAGE, params={"score.helpfulness.min": "0.9"})
                client.get("/_served")
                for round_ in range(rounds):
                    direct: list[float] = []
                    http: list[float] = []
                    for _ in range(samples):
                        bound = "0.9" if bounds is None else f"{bounds.random():.2f}"
                        direct.append(client.get("/_direct", params={"bound": bound}).json()["ms"])
                        began = time.perf_counter()
                        client.get(GAP_PAGE, params={"score.helpfulness.min": bound})
                        http.append((time.perf_counter() - began) * 1000)
                    served = client.get("/_served").json()
                    print(
                        f"  {label:<13} round {round_ + 1} (load {os.getloadavg()[0]:4.1f}) "
                        f"p50 / p95 ms: in process {_quantiles(direct)} | served "
                        f"{_quantiles(served)} | over HTTP {_quantiles(http)}",
                        flush=True,
                    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--scores", type=int, help="default: as many as --records")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--reuse", action="store_true", help="measure the reads of --data-dir")
    parser.add_argument("--ingest-only", action="store_true", help="skip the read latencies")
    parser.add_argument(
        "--only", default="", help="measure the reads whose label holds this (a|b: either)"
    )
    parser.add_argument("--timeout", type=float, default=120, help="of one read request (s)")
    parser.add_argument(
        "--quiet-wait", type=float, default=120, help="at most this long for a quiet machine (s)"
    )
    parser.add_argument(
        "--ids",
        choices=("bench", "sdk", "random"),
        default="bench",
        help="record ids: req_bench<n> (time order), the SDK's (time first), or all random",
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument(
        "--gap",
        action="store_true",
        help="with --reuse: one list page in process and over HTTP, pair by pair",
    )
    parser.add_argument("--rounds", type=int, default=3, help="of --gap")
    parser.add_argument("--gap-server", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.gap_server:
        gap_server(args.data_dir, args.gap_server)
        return
    if args.reuse and not args.data_dir:
        parser.error("--reuse needs the --data-dir of an earlier run")
    if args.ids != "bench" and args.write_docs:
        parser.error("--write-docs writes the req_bench ids' run; note other --ids by hand")
    if args.gap:
        if not args.reuse:
            parser.error("--gap measures the store of an earlier load: add --reuse")
        gap(args.data_dir, args.samples, args.rounds)
        return
    total_scores = args.scores or args.records
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="promptrail-bench-scores-"))
    saved = data_dir / "scores-ingest.json"
    with collector(data_dir, KEY, PROMPTRAIL_MAX_BODY_BYTES=str(64 << 20)) as served:
        print(f"data dir {data_dir}; collector on {served.url}", flush=True)
        watch = MemoryWatch(served.process.pid)
        if args.reuse:
            loaded = json.loads(saved.read_text())
            records, scores = IngestResult(**loaded["records"]), IngestResult(**loaded["scores"])
            args.records = loaded["total"]
            args.ids = loaded.get("ids", "bench")
        else:
            pid = served.process.pid
            records = ingest(served.url, args.records, 5000, args.workers, pid, ids=args.ids)
            print(f"records: {rate(records, 'records')}", flush=True)
            scores = ingest_scores(
                served.url, args.records, total_scores, args.workers, pid, args.ids
            )
            print(f"scores: {rate(scores, 'scores')}", flush=True)
            saved.write_text(
                json.dumps(
                    {
                        "records": asdict(records),
                        "scores": asdict(scores),
                        "total": args.records,
                        "ids": args.ids,
                    }
                )
            )
        results: list[dict[str, Any]] = []
        if not args.ingest_only:
            # The store merges its fresh parts for a while; on a shared machine it may never
            # be quiet, so the wait is bounded and the busy share printed.
            settled, busy = wait_quiet(max_seconds=args.quiet_wait)
            print(f"measuring after {settled:.0f} s ({busy:.0%} busy)", flush=True)
            results = reads(
                served.url,
                args.records,
                args.samples,
                args.only,
                args.timeout,
                args.ids,
                served.process.pid,
            )
        peak = watch.stop()
    print(f"collector peak RSS {peak:.0f} MiB")
    ratio = (scores.accepted / scores.elapsed) / (records.accepted / records.elapsed)
    print(f"scores/s : records/s = {ratio:.2f}")
    if args.write_docs:
        label = "reads re-measured on the store of an earlier load" if args.reuse else "one load"
        write_docs(args, records, scores, results, peak, label)
        print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
