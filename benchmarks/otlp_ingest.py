"""OTLP against the JSON batch route: the same model calls, records per second through each.

    .venv/bin/python benchmarks/otlp_ingest.py [--records 100000] [--rounds 2] [--write-docs]

Issue 35 asks OTLP ingest to come within 20% of the JSON batch route in records per second.
Each round starts ``promptrail serve`` on a fresh data dir twice, once per route, alternating
which goes first, and sends the same ``--records`` model calls from 4 client threads in
batches of ``--batch`` (2,000), each body gzip-compressed (what the SDK's shipper sends, and
the OTel exporter with ``compression=gzip``):

- ``POST /v1/requests/batch``: the records as the SDK's shipper writes them;
- ``POST /v1/traces``: the same calls as OTLP/protobuf GenAI spans (one
  ``ExportTraceServiceRequest`` per batch), the attributes the OpenTelemetry GenAI
  conventions and promptrail's exporter set: operation, model, provider, token counts, input
  and output messages, prompt name and version, metadata.

``--senders 1 --batch 512 --only otlp`` is one exporter in flight as an OpenTelemetry
``BatchSpanProcessor`` sends (512 spans an export, the next export once the last is answered;
issue 52): latency-bound, so what it measures is one export's time through the collector.
``--journal both`` runs each round twice per route, with the embedded store's request-log
journal on and off (``PROMPTRAIL_REQUEST_JOURNAL``), alternating which goes first: the
before and after of the journal in one run. With the journal the answers come before the
inserts, so "until visible" (every record counted by the analytics) and the CPU until then
are the figures to compare.

Every body is built before the clock starts, so the figures are the collector's: the time
from the first request until every batch is answered (both routes answer once the records
are written), the collector's CPU seconds meanwhile, and the records each route took (all
of them, checked).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from _harness import collector
from _report import Machine, load_average, random_words
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

API_KEY = "pr-bench-" + "3" * 32
SENDERS = 4
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest", "gpt-4.1-mini")
WORDS = [
    "order",
    "refund",
    "ship",
    "invoice",
    "account",
    "password",
    "delivery",
    "late",
    "broken",
    "thanks",
    "please",
    "help",
]


@dataclass(frozen=True)
class Call:
    """One model call, as both routes carry it."""

    trace_id: str
    span_id: str
    start: datetime
    latency_ms: int
    model: str
    prompt: str
    version: int
    question: str
    answer: str
    input_tokens: int
    output_tokens: int
    user: str


def calls(total: int, seed: int = 35) -> list[Call]:
    """``total`` calls spread over the last day, texts of 200-2,000 characters."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    out = []
    for _ in range(total):
        out.append(
            Call(
                trace_id=secrets.token_hex(16),
                span_id=secrets.token_hex(8),
                start=now - timedelta(seconds=rng.uniform(0, 86_400)),
                latency_ms=rng.randint(200, 4_000),
                model=rng.choice(MODELS),
                prompt=f"prompt-{rng.randrange(50):02d}",
                version=rng.randint(1, 5),
                question=" ".join(random_words(rng, WORDS, rng.randint(30, 300))),
                answer=" ".join(random_words(rng, WORDS, rng.randint(30, 300))),
                input_tokens=rng.randint(50, 2_000),
                output_tokens=rng.randint(20, 800),
                user=f"user-{rng.randrange(2_000)}",
            )
        )
    return out


def json_body(batch: list[Call]) -> bytes:
    """The batch route's body, as the SDK's shipper writes it."""
    records = [
        {
            "id": f"req_{c.trace_id}{c.span_id}",  # as the SDK names a span's record
            "created_at": c.start.isoformat().replace("+00:00", "Z"),
            "trace_id": c.trace_id,
            "span_id": c.span_id,
            "kind": "llm",
            "provider": "openai",
            "model": c.model,
            "prompt_name": c.prompt,
            "version": c.version,
            "input": [{"role": "user", "content": c.question}],
            "output": {"role": "assistant", "content": c.answer},
            "span_name": f"chat {c.model}",
            "usage": {"prompt_tokens": c.input_tokens, "completion_tokens": c.output_tokens},
            "latency_ms": c.latency_ms,
            "metadata": {"user_id": c.user},
        }
        for c in batch
    ]
    return gzip.compress(json.dumps({"records": records}).encode(), compresslevel=1)


def _attr(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def otlp_body(batch: list[Call]) -> bytes:
    """The same calls as one OTLP/protobuf export of GenAI spans."""
    spans = []
    for c in batch:
        start_ns = int(c.start.timestamp() * 1e9)
        spans.append(
            Span(
                trace_id=bytes.fromhex(c.trace_id),
                span_id=bytes.fromhex(c.span_id),
                name=f"chat {c.model}",
                kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=start_ns,
                end_time_unix_nano=start_ns + c.latency_ms * 1_000_000,
                attributes=[
                    _attr("gen_ai.operation.name", "chat"),
                    _attr("gen_ai.provider.name", "openai"),
                    _attr("gen_ai.request.model", c.model),
                    _attr("gen_ai.usage.input_tokens", c.input_tokens),
                    _attr("gen_ai.usage.output_tokens", c.output_tokens),
                    _attr(
                        "gen_ai.input.messages",
                        json.dumps(
                            [{"role": "user", "parts": [{"type": "text", "content": c.question}]}]
                        ),
                    ),
                    _attr(
                        "gen_ai.output.messages",
                        json.dumps(
                            [
                                {
                                    "role": "assistant",
                                    "parts": [{"type": "text", "content": c.answer}],
                                }
                            ]
                        ),
                    ),
                    _attr("promptrail.prompt.name", c.prompt),
                    _attr("promptrail.prompt.version", c.version),
                    _attr("promptrail.metadata", json.dumps({"user_id": c.user})),
                ],
            )
        )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    )
    return gzip.compress(request.SerializeToString(), compresslevel=1)


ROUTES = {
    "json": ("/v1/requests/batch", "application/json", json_body),
    "otlp": ("/v1/traces", "application/x-protobuf", otlp_body),
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def taken(route: str, response: httpx.Response) -> int:
    """How many records one answered batch stored."""
    if response.status_code not in (200, 201):
        raise RuntimeError(f"{route} -> {response.status_code}: {response.text[:300]}")
    if route == "json":
        return int(response.json()["data"]["accepted"])
    return -1  # OTLP answers only what it rejected: the log's count is checked afterwards


@dataclass(frozen=True)
class Run:
    route: str
    records: int
    seconds: float
    cpu: float
    visible: float = 0.0
    cpu_visible: float = 0.0  # the collector's CPU until every record was visible
    journal: str = "on"

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def run(
    route: str,
    bodies: list[bytes],
    expected: int,
    data_dir: Path,
    senders: int = SENDERS,
    journal: str = "on",
) -> Run:
    """One route into a fresh collector: every body from ``senders`` threads, timed until the
    last is answered (``seconds``) and until every record is readable (``visible``);
    ``journal`` on or off: the request-log journal of the embedded store."""
    path, content_type, _ = ROUTES[route]
    headers = {
        "Authorization": f"Bearer {API_KEY}",
        "Content-Type": content_type,
        "Content-Encoding": "gzip",
    }
    flag = {"PROMPTRAIL_REQUEST_JOURNAL": "1" if journal == "on" else "0"}
    with collector(data_dir, API_KEY, **flag) as running:
        limits = httpx.Limits(max_connections=senders, max_keepalive_connections=senders)
        with httpx.Client(base_url=running.url, timeout=300, limits=limits) as client:
            cpu_before = cpu_seconds(running.process.pid)
            started = time.perf_counter()
            with ThreadPoolExecutor(senders) as pool:
                answers = list(
                    pool.map(lambda b: client.post(path, content=b, headers=headers), bodies)
                )
            seconds = time.perf_counter() - started
            cpu = cpu_seconds(running.process.pid) - cpu_before
            for answer in answers:
                taken(route, answer)
            count = count_records(client, expected)
            visible = time.perf_counter() - started
            cpu_visible = cpu_seconds(running.process.pid) - cpu_before
            if count != expected:
                raise RuntimeError(f"{route}: {count} records stored, not {expected}")
    return Run(route, expected, seconds, cpu, visible, cpu_visible, journal)


def count_records(client: httpx.Client, expected: int) -> int:
    """The records the log holds, by the analytics' per-model counts (waits up to 2 min)."""
    today = datetime.now(UTC).date()
    params = {
        "metric": "usage",
        "group_by": "model",
        "start_date": str(today - timedelta(days=2)),
        "end_date": str(today + timedelta(days=1)),
    }
    deadline = time.monotonic() + 120
    count = 0
    while time.monotonic() < deadline:
        answer = client.get(
            "/v1/requests/analytics", params=params, headers={"Authorization": f"Bearer {API_KEY}"}
        )
        if answer.status_code != 200:
            raise RuntimeError(f"analytics -> {answer.status_code}: {answer.text[:300]}")
        count = sum(int(g["count"]) for g in answer.json()["data"]["groups"])
        if count == expected:
            return count
        time.sleep(0.5)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--senders", type=int, default=SENDERS, help="requests in flight")
    parser.add_argument("--only", choices=tuple(ROUTES), help="measure one route (profiling)")
    parser.add_argument(
        "--journal",
        choices=("on", "off", "both"),
        default="on",
        help="the request-log journal (both: each round with and without it, alternating)",
    )
    args = parser.parse_args()
    machine = Machine.current()
    print(f"- Machine: {machine.line()}\n- Date: {machine.date}\n- Load: {load_average()}")
    every = calls(args.records)
    batches = [every[i : i + args.batch] for i in range(0, len(every), args.batch)]
    bodies = {route: [spec[2](b) for b in batches] for route, spec in ROUTES.items()}
    for route, parts in bodies.items():
        print(f"  {route}: {sum(map(len, parts)) / args.records:.0f} bytes a record (gzip)")
    results: dict[str, list[Run]] = {"json": [], "otlp": []}
    scratch = Path(tempfile.mkdtemp(prefix="promptrail-otlp-"))
    try:
        for n in range(args.rounds):
            order = ("json", "otlp") if n % 2 == 0 else ("otlp", "json")
            order = tuple(r for r in order if args.only in (None, r))
            modes = ("on", "off") if args.journal == "both" else (args.journal,)
            if n % 2:
                modes = modes[::-1]
            for route in order:
                for mode in modes:
                    where = scratch / f"{route}-{mode}-{n}"
                    result = run(
                        route, bodies[route], args.records, where, args.senders, journal=mode
                    )
                    results[route].append(result)
                    print(
                        f"  round {n + 1} {route} journal {mode}: {result.records:,} records in "
                        f"{result.seconds:.1f} s = {result.rate:,.0f}/s "
                        f"({args.records / result.visible:,.0f}/s until visible); collector CPU "
                        f"{result.cpu_visible:.1f} s until visible "
                        f"({result.cpu_visible / result.records * 1e6:.0f} µs a record)",
                        flush=True,
                    )
                    shutil.rmtree(where, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.only or args.journal == "both":
        return
    json_rate = statistics.median(r.rate for r in results["json"])
    otlp_rate = statistics.median(r.rate for r in results["otlp"])
    json_cpu = statistics.median(r.cpu / r.records for r in results["json"]) * 1e6
    otlp_cpu = statistics.median(r.cpu / r.records for r in results["otlp"]) * 1e6
    print(
        f"- Median of {args.rounds}: JSON batch {json_rate:,.0f} records/s ({json_cpu:.0f} µs of "
        f"collector CPU a record), OTLP {otlp_rate:,.0f} records/s ({otlp_cpu:.0f} µs): OTLP / "
        f"JSON = {otlp_rate / json_rate:.2f} (target >= 0.80)"
    )
    print(f"- Load after: {load_average()}")


if __name__ == "__main__":
    sys.exit(main())
