"""Online evaluation at speed and scale (issue 50, "Speed and scale").

    .venv/bin/python benchmarks/evaluation.py [--write-docs]
    .venv/bin/python benchmarks/evaluation.py --only reads --decisions 200000   # a quick try

Three parts, each on fresh collectors (``promptrail serve`` on a new data directory), the
judges calling an OpenAI stub (``promptrail.testing``) that answers after 100 ms
(``first_byte_delay``), served in this process:

- **ingest** (``--rounds`` rounds): the request-log benchmark's load (``request_log.ingest``:
  gzip JSON batches through ``POST /v1/requests/batch``) on a collector with no rule, then on
  one with 5 enabled rules matching every record (3 code evaluators, 2 LLM judges), in turn,
  each on a fresh store; the medians of both sides and their ratio (target: >= 90%).
- **latency**: records sent at ``--rate`` records/s (a batch every 0.5 s) for
  ``--seconds`` to a collector with the 3 code rules; for a sample of them (the first record
  of every other batch), the time from the batch's acknowledgement to the first code rule's
  score answering ``GET /v1/scores?request_id=`` (the oldest pending polled every 100 ms,
  as the rules decide in arrival order); and whether the rules
  keep up: when each has decided every record (its counts), against when the last batch was
  acknowledged (target: 2,000 records/s; p95 <= 2 s).
- **reads**: ``--decisions`` decisions (default 1M) of 5 rules over ``--targets`` records
  (rules covering 100%, 60%, 40%, 30% and 20% of them; seven kinds of decision; one in 20
  with an earlier ``waiting`` row it replaced; decided over 30 days), inserted straight into
  the store's own table (``INSERT ... SELECT ... FROM numbers()``, its views filling the
  time and target orders) with the collector stopped, the first ``--records`` of the targets
  logged through the batch route beforehand. Then p50/p95 over one keep-alive connection of
  a rule's decisions pages (target p95 <= 50 ms) and of a record's detail with its
  ``evaluations`` (target <= 20 ms), the detail also timed before the decisions were loaded.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _harness import Collector, check, collector
from _report import Machine, load_average, write_section
from request_log import KEY, IngestResult, cpu_seconds, ingest, make_pool, measure, record_id

from promptrail.testing import OpenAIStub, serve

SECTION = "## Online evaluation (`benchmarks/evaluation.py`)"
DELAY = 0.100
BODY_LIMIT = {"PROMPTRAIL_MAX_BODY_BYTES": str(64 << 20)}
PROJECT = "default"
DATABASE = "promptrail"
# The code evaluators and the judge (named evaluators, PUT as a user would).
CODE = {
    "valid-json": {"type": "json_valid"},
    "has-digit": {"type": "regex", "pattern": r"\d"},
    "mentions-refund": {"type": "regex", "pattern": "refund"},
}
JUDGE = {"grade": {"type": "llm_judge", "prompt": "grader"}}
# How much of the targets each of the reads' 5 rules decided (a filter, a sample).
COVER = (1.0, 0.6, 0.4, 0.3, 0.2)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@contextmanager
def stub_server() -> Iterator[dict[str, str]]:
    """The OpenAI stub answering after DELAY, served here; yields the collector's settings."""
    stub = OpenAIStub()
    stub.script.first_byte_delay = DELAY
    stub.script.reply = "Score: 4"
    # A collector stopped after its ingest cuts its judges' calls short: the stub's server
    # would print each one's ClientDisconnect.
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    with serve(stub.app, lifespan="off") as url:
        stub.url = url
        yield {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-bench", **BODY_LIMIT}


def client_of(served: Collector) -> httpx.Client:
    """A keep-alive client of the collector with the benchmark's key."""
    return httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
    )


def make_judge(client: httpx.Client) -> None:
    """Create the judge's prompt and PUT the judge (``grade``)."""
    prompt = {"name": "grader", "template": "Grade {output} from 1-5", "model": "gpt-4o-mini"}
    check(client.post("/v1/prompts", json=prompt), 201)
    check(client.put("/v1/evaluators/grade", json=JUDGE["grade"]))


def make_rules(client: httpx.Client, judges: bool = True) -> list[str]:
    """PUT the evaluators and create the rules judging every record: the 3 code ones, then
    2 judges (with ``judges``). Returns the rules' ids in that order."""
    names = [*CODE, *(["grade", "grade"] if judges else [])]
    for name in CODE:
        check(client.put(f"/v1/evaluators/{name}", json=CODE[name]))
    if judges:
        make_judge(client)
    return [
        check(
            client.post(
                "/v1/evaluation-rules",
                json={"name": f"bench {n}: {name}", "evaluator": name, "target": "record"},
            ),
            201,
        ).json()["data"]["id"]
        for n, name in enumerate(names)
    ]


def decided(client: httpx.Client, rule_id: str) -> int:
    """How many targets the rule decided in the last 24 hours (its counts)."""
    counts = check(client.get(f"/v1/evaluation-rules/{rule_id}")).json()["data"]["counts"]
    return sum(int(v) for k, v in counts.items() if k != "waiting")


# -- ingest with and without rules --------------------------------------------------------


@dataclass
class IngestRun:
    """One ingest on a fresh collector."""

    rules: bool
    result: IngestResult
    load: str
    decided_after: int = 0
    judged: dict[str, int] = field(default_factory=dict)  # a judge rule's counts


def ingest_round(
    settings: dict[str, str], rules: bool, records: int, batch: int, workers: int
) -> IngestRun:
    """Ingest ``records`` on a fresh collector, with the 5 rules enabled or none."""
    data_dir = Path(tempfile.mkdtemp(prefix="promptrail-bench-eval-"))
    try:
        with collector(data_dir, KEY, **settings) as served, client_of(served) as client:
            ids = make_rules(client) if rules else []
            print(f"  collector pid {served.process.pid}", flush=True)
            time.sleep(1.0)  # the worker has read its rules and made its first pass
            load = load_average()
            result = ingest(served.url, records, batch, workers, served.process.pid)
            if not ids:
                return IngestRun(rules, result, load)
            judged = check(client.get(f"/v1/evaluation-rules/{ids[3]}")).json()["data"]
            return IngestRun(rules, result, load, decided(client, ids[0]), judged["counts"])
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def measure_ingest(
    settings: dict[str, str], rounds: int, records: int, batch: int, workers: int
) -> list[IngestRun]:
    """``rounds`` rounds, each one collector without rules and one with, in turn."""
    runs = []
    for number in range(rounds):
        for rules in (False, True) if number % 2 == 0 else (True, False):
            run = ingest_round(settings, rules, records, batch, workers)
            runs.append(run)
            rate = run.result.accepted / run.result.elapsed
            cpu = run.result.collector_cpu / run.result.accepted * 1e6
            print(
                f"  round {number + 1}, {'5 rules' if rules else 'no rule'}: {rate:,.0f} "
                f"records/s, collector CPU {cpu:.0f} us/record, load {run.load}"
                + (
                    f"; decided by then: {run.decided_after:,} by the first code rule, "
                    f"by the first judge {run.judged}"
                    if rules
                    else ""
                ),
                flush=True,
            )
    return runs


def ingest_summary(runs: list[IngestRun]) -> tuple[float, float, float, float]:
    """Median rates without and with rules, and median collector CPU per record (us)."""

    def rates(rules: bool) -> list[float]:
        return [r.result.accepted / r.result.elapsed for r in runs if r.rules == rules]

    def cpu(rules: bool) -> list[float]:
        return [r.result.collector_cpu / r.result.accepted * 1e6 for r in runs if r.rules == rules]

    return (
        statistics.median(rates(False)),
        statistics.median(rates(True)),
        statistics.median(cpu(False)),
        statistics.median(cpu(True)),
    )


# -- decision latency at a steady rate ----------------------------------------------------


@dataclass
class LatencyRun:
    """The paced load's figures."""

    sent: int = 0
    send_seconds: float = 0.0
    late_batches: int = 0
    latencies: list[float] = field(default_factory=list)
    unseen: int = 0
    drained: list[float] = field(default_factory=list)  # per rule: s after the last ack
    backlog: list[int] = field(default_factory=list)  # per rule: undecided at the last ack
    drain_cpu_ms: float = 0.0  # the collector's CPU per decision while deciding the backlog
    load: str = ""


def paced_bodies(rate: int, seconds: float) -> list[tuple[list[str], bytes]]:
    """The batches of a paced load (one every PACE seconds), made before the clock starts."""
    pool = make_pool(random.Random(2))
    size = max(1, round(rate * PACE))
    batches = []
    for number in range(round(seconds / PACE)):
        ids = [f"req_pace{number:05d}{i:04d}" for i in range(size)]
        records = [
            {**pool[(number * size + i) % len(pool)], "id": rid} for i, rid in enumerate(ids)
        ]
        batches.append((ids, json.dumps({"records": records}).encode()))
    return batches


# Seconds between two batches of the paced load (200 records every 100 ms cost the collector
# more per record than it could take on this shared machine).
PACE = 0.5
# Threads sending the paced batches, each on a connection of its own: a batch goes out on
# time while earlier ones are still being stored.
SENDERS = 4


def send(
    served: Collector,
    schedule: Iterator[tuple[int, tuple[list[str], bytes]]],
    began: float,
    run: LatencyRun,
    lock: threading.Lock,
    pending: dict[str, float],
) -> None:
    """Send the paced batches (one every PACE seconds from ``began``) as their time comes; note
    the acknowledgement of the first record of every other batch in ``pending``."""
    headers = {"Content-Type": "application/json"}
    with client_of(served) as client:
        while True:
            with lock:
                item = next(schedule, None)
            if item is None:
                return
            number, (batch_ids, body) = item
            due = began + number * PACE
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)
            elif now - due > PACE:
                with lock:
                    run.late_batches += 1
            response = client.post("/v1/requests/batch", content=body, headers=headers)
            while response.status_code == 503:
                time.sleep(float(response.headers.get("retry-after", "1")))
                response = client.post("/v1/requests/batch", content=body, headers=headers)
            acked = time.perf_counter()
            check(response, 201)
            with lock:
                run.sent += len(batch_ids)
                if number % 2 == 0:
                    pending[batch_ids[0]] = acked


def measure_latency(settings: dict[str, str], rate: int, seconds: float) -> LatencyRun:
    """Send ``rate`` records/s for ``seconds`` to a collector with the 3 code rules."""
    run = LatencyRun()
    data_dir = Path(tempfile.mkdtemp(prefix="promptrail-bench-eval-"))
    batches = paced_bodies(rate, seconds)
    try:
        with collector(data_dir, KEY, **settings) as served, client_of(served) as client:
            ids = make_rules(client, judges=False)
            score_name = "valid-json"  # the first rule's score (its evaluator's name)
            print(f"  collector pid {served.process.pid}", flush=True)
            time.sleep(1.0)
            run.load = load_average()
            pending: dict[str, float] = {}
            lock = threading.Lock()
            sending = threading.Event()
            sending.set()

            def poll() -> None:
                # Each rule decides records in the order they arrived: only the oldest
                # pending ones are asked for, up to the first not scored yet (asking for
                # every pending record each time would load the collector it measures).
                with client_of(served) as poller:
                    while sending.is_set() or pending:
                        with lock:
                            waiting = sorted(pending.items(), key=lambda item: item[1])
                        for rid, acked in waiting:
                            found = poller.get("/v1/scores", params={"request_id": rid})
                            names = {s["name"] for s in check(found).json()["data"]}
                            if score_name in names:
                                run.latencies.append(time.perf_counter() - acked)
                            elif time.perf_counter() - acked > 120:
                                run.unseen += 1
                            else:
                                break
                            with lock:
                                del pending[rid]
                        time.sleep(0.1)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            began = time.perf_counter()
            schedule = iter(enumerate(batches))
            given = (served, schedule, began, run, lock, pending)
            senders = [threading.Thread(target=send, args=given) for _ in range(SENDERS)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
            last_ack = time.perf_counter()
            run.send_seconds = last_ack - began
            sending.clear()
            print(
                f"  sent {run.sent:,} records in {run.send_seconds:.1f} s "
                f"({run.sent / run.send_seconds:,.0f}/s, {run.late_batches} batches late)",
                flush=True,
            )
            # What each rule had decided when the load ended: the rest is its backlog, decided
            # with the collector doing nothing else.
            cpu_began = cpu_seconds(served.process.pid)
            run.backlog = [run.sent - decided(client, rule_id) for rule_id in ids]
            print(f"  backlog when the load ended: {run.backlog}", flush=True)
            drained: dict[str, float] = {}
            deadline = time.perf_counter() + 600
            while len(drained) < len(ids) and time.perf_counter() < deadline:
                for rule_id in ids:
                    if rule_id not in drained and decided(client, rule_id) >= run.sent:
                        drained[rule_id] = time.perf_counter() - last_ack
                time.sleep(1.0)
            run.drained = [drained.get(rule_id, float("inf")) for rule_id in ids]
            # The collector's CPU over the backlog's decisions (all rules): what the machine's
            # load does not change much, unlike the seconds.
            run.drain_cpu_ms = (
                (cpu_seconds(served.process.pid) - cpu_began) * 1e3 / max(1, sum(run.backlog))
            )
            poller.join(timeout=180)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return run


# -- reads at 1M decisions ----------------------------------------------------------------

_LOAD = """
INSERT INTO {db}.evaluation_decisions
  (project, rule_id, target_type, target_id, decision, reason, evaluator, evaluator_version,
   score_id, judge_request_id, cost_usd, decided_at, row_version)
SELECT project, rule_id, 'record', target_id, decision, reason, evaluator, 1,
  if(decision = 'scored',
     concat('eval_', substring(lower(hex(SHA256(concat(rule_id, '\\0', target_id)))), 1, 40)),
     NULL),
  if(decision = 'scored' AND judge, concat('req_judge', toString(n)), NULL),
  if(decision = 'scored' AND judge, 0.00042, NULL),
  decided_at,
  if(decision = 'waiting', 0, bitShiftLeft(toUInt64(1), 62))
    + toUInt64(toUnixTimestamp64Micro(decided_at))
FROM (
  SELECT number AS n, {{project:String}} AS project, number % {{k:UInt64}} AS k,
    intDiv(number, {{k:UInt64}}) AS i,
    {{rules:Array(String)}}[k + 1] AS rule_id,
    {{evaluators:Array(String)}}[k + 1] AS evaluator,
    k >= 3 AS judge,
    concat('req_bench', leftPad(toString(i), 10, '0')) AS target_id,
    cityHash64(n, 7) % 100 AS draw,
    multiIf(draw < 70, 'scored', draw < 88, 'not_sampled', draw < 93, 'error',
            draw < 96, 'rate_limited', draw < 98, 'budget_exhausted',
            draw < 99, 'connection_blocked', 'waiting') AS kind,
    {kind} AS decision,
    multiIf(decision = 'scored', 'regex: true', decision = 'not_sampled',
            'outside the rule''s sample', decision = 'error',
            'the mapped output names nothing in the record', decision = 'rate_limited',
            'over the rule''s 600 evaluations a minute', decision = 'budget_exhausted',
            'spent 5.000000 USD today (UTC) of a daily budget of 5.0 USD',
            decision = 'connection_blocked', 'quota_exceeded',
            'decided once the delay has passed') AS reason,
    fromUnixTimestamp64Micro(toInt64({{first:Int64}} + i * {{step:Int64}} + k * 150000
      + cityHash64(n, 3) % 2000000 - {shift}), 'UTC') AS decided_at
  FROM numbers({{pairs:UInt64}})
  WHERE cityHash64(k, i) % 1000 < {{cover:Array(UInt64)}}[k + 1] {extra}
)
"""


_ENDED = """
INSERT INTO {db}.evaluation_waiting
  (project, rule_id, decided_at, target_type, target_id, row_version, sign)
SELECT project, rule_id, decided_at, target_type, target_id, 0, -1
FROM {db}.evaluation_decision_times
WHERE decision = 'waiting' AND (project, rule_id, target_type, target_id) IN (
  SELECT project, rule_id, target_type, target_id FROM {db}.evaluation_decisions FINAL
  WHERE decision != 'waiting')
"""


def load_decisions(
    data_dir: Path, rules: list[str], evaluators: list[str], targets: int, records: int
) -> None:
    """Insert the reads' decisions straight into the stopped collector's store (run in a
    process of its own: chDB runs one engine per process)."""
    from promptrail.collector.store.connection import close_client, open_client

    client = open_client(f"chdb://{(data_dir / 'clickhouse').resolve()}")
    span_us = 30 * 86_400 * 1_000_000
    params = {
        "project": PROJECT,
        "k": len(rules),
        "rules": rules,
        "evaluators": evaluators,
        "first": int(time.time() * 1e6) - span_us,
        "step": span_us // targets,
        "pairs": targets * len(rules),
        "cover": [round(c * 1000) for c in COVER],
    }
    try:
        # The decisions; then, for one in 20 final ones, the waiting row each replaced
        # (a minute earlier, a lower row version): candidates in the time order that the page
        # must skip.
        client.command(
            _LOAD.format(db=DATABASE, kind="kind", shift="0", extra=""), parameters=params
        )
        client.command(
            _LOAD.format(
                db=DATABASE,
                kind="'waiting'",
                shift="60000000",
                extra="AND cityHash64(n, 9) % 20 = 0 AND kind != 'waiting'",
            ),
            parameters=params,
        )
        # What the decision store writes beside a final decision replacing a waiting one
        # (migration 44): the -1 that ends it among the waiting decisions.
        client.command(_ENDED.format(db=DATABASE))
        table = f"{DATABASE}.evaluation_decisions"
        per_rule = dict(
            client.query(f"SELECT rule_id, count() FROM {table} FINAL GROUP BY rule_id").result_rows
        )
        # Logged records that every rule decided: the detail with the most evaluations.
        full = client.query(
            f"SELECT target_id FROM {table} FINAL WHERE target_id < {{last:String}} "
            "GROUP BY target_id HAVING count() = {k:UInt64} ORDER BY target_id LIMIT 500",
            parameters={"last": record_id(records), "k": len(rules)},
        ).result_rows
        found = {
            "decisions": sum(int(v) for v in per_rule.values()),
            "per_rule": [int(per_rule.get(r, 0)) for r in rules],
            "full": [str(r[0]) for r in full],
        }
        print(json.dumps(found))
    finally:
        close_client(client)


@dataclass
class ReadsRun:
    """The reads' figures."""

    decisions: int = 0
    per_rule: list[int] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    load: str = ""
    load_seconds: float = 0.0


def measure_reads(records: int, targets: int, samples: int, workers: int) -> ReadsRun:
    """Load the decisions with the collector stopped, then time the reads over HTTP."""
    run = ReadsRun()
    data_dir = Path(tempfile.mkdtemp(prefix="promptrail-bench-eval-"))
    rng = random.Random(5)
    try:
        with collector(data_dir, KEY, **BODY_LIMIT) as served, client_of(served) as client:
            rules = make_rules(client)
            # The rules judge nothing while the decisions are loaded (their ids are used).
            for rule_id in rules:
                check(client.patch(f"/v1/evaluation-rules/{rule_id}", json={"enabled": False}))
            ingest(served.url, records, 5000, workers, served.process.pid)
            print(f"  logged {records:,} records", flush=True)
            time.sleep(20)  # as before the reads below: the ingest's fresh parts merge first
            before = timed(
                served,
                client,
                "record detail, no decisions yet",
                lambda i: (f"/v1/requests/{record_id(rng.randrange(records))}", {}),
                samples,
            )
        evaluators = [*CODE, "grade", "grade"]
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--load-worker", str(data_dir), "--targets", str(targets),
             "--rules", ",".join(rules), "--evaluators", ",".join(evaluators),
             "--records", str(records)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        run.load_seconds = time.perf_counter() - began
        loaded = json.loads(done.stdout.strip().splitlines()[-1])
        run.decisions, run.per_rule, all_five = (
            loaded["decisions"],
            loaded["per_rule"],
            loaded["full"],
        )
        print(f"  loaded {run.decisions:,} decisions in {run.load_seconds:.0f} s", flush=True)
        with collector(data_dir, KEY, **BODY_LIMIT) as served, client_of(served) as client:
            time.sleep(20)  # the start's own work and the fresh parts' first merges
            run.load = load_average()
            deep = _cursor_after(client, rules[0], 40)
            pages: list[tuple[str, str, dict[str, Any]]] = [
                ("decisions, first page (rule of 100%)", rules[0], {}),
                ("decisions, first page (rule of 20%)", rules[4], {}),
                ("decisions, page 41 by cursor (100%)", rules[0], {"cursor": deep}),
                ("decisions, decision=error (100%)", rules[0], {"decision": "error"}),
                ("decisions, decision=waiting (100%)", rules[0], {"decision": "waiting"}),
            ]
            for label, rule_id, params in pages:
                run.results.append(
                    timed(
                        served,
                        client,
                        label,
                        lambda i, r=rule_id, p=params: (
                            f"/v1/evaluation-rules/{r}/decisions",
                            {"limit": 50, **p},
                        ),
                        samples,
                    )
                )
            run.results.append(
                timed(
                    served,
                    client,
                    "a rule with its counts (24 h)",
                    lambda i: (f"/v1/evaluation-rules/{rng.choice(rules)}", {}),
                    samples,
                )
            )
            run.results.append(before)
            run.results.append(
                timed(
                    served,
                    client,
                    "record detail, evaluations of 5 rules",
                    lambda i: (f"/v1/requests/{rng.choice(all_five)}", {}),
                    samples,
                )
            )
            run.results.append(
                timed(
                    served,
                    client,
                    "record detail, any record",
                    lambda i: (f"/v1/requests/{record_id(rng.randrange(records))}", {}),
                    samples,
                )
            )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return run


def timed(
    served: Collector,
    client: httpx.Client,
    label: str,
    make: Callable[[int], tuple[str, dict[str, Any]]],
    samples: int,
) -> dict[str, Any]:
    """``request_log.measure`` (p50/p95 over the keep-alive ``client``), with the collector's
    CPU per request beside it (its 5 warm-up requests counted in): the part of a read's time
    that the machine's load does not stretch."""
    began = cpu_seconds(served.process.pid)
    result = measure(client, label, make, samples)
    result["cpu"] = (cpu_seconds(served.process.pid) - began) * 1e3 / (samples + min(5, samples))
    print(f"  {'':<38} collector CPU {result['cpu']:.1f} ms per request", flush=True)
    return result


def _cursor_after(client: httpx.Client, rule_id: str, pages: int) -> str:
    """The cursor of the rule's page ``pages + 1`` (50 a page)."""
    cursor = None
    for _ in range(pages):
        params: dict[str, Any] = {"limit": 50}
        if cursor:
            params["cursor"] = cursor
        cursor = check(
            client.get(f"/v1/evaluation-rules/{rule_id}/decisions", params=params)
        ).json()["pagination"]["next_cursor"]
    assert cursor is not None
    return str(cursor)


# -- the run and its report ---------------------------------------------------------------


def ingest_lines(runs: list[IngestRun]) -> list[str]:
    """The ingest part's docs lines."""
    if not runs:
        return []
    none, five, cpu_none, cpu_five = ingest_summary(runs)
    order = ", ".join(
        f"{'rules' if r.rules else 'none'} {r.result.accepted / r.result.elapsed:,.0f}"
        f" (load {r.load.split(' / ')[0]})"
        for r in runs
    )
    return [
        f"- **Ingest with 5 rules against none**: median **{five:,.0f}** records/s with the "
        f"rules, **{none:,.0f}** without: **{five / none:.0%}** (target >= 90%). Collector "
        f"CPU per record, medians: {cpu_five:.0f} us with, {cpu_none:.0f} us without. "
        f"Runs in order (records/s, 1-minute load when each began): {order}.",
    ]


def latency_lines(run: LatencyRun | None, rate: int) -> list[str]:
    """The latency part's docs lines."""
    if run is None:
        return []
    drained = ", ".join("not in 600 s" if d == float("inf") else f"{d:.1f} s" for d in run.drained)
    lat = (
        f"p50 **{percentile(run.latencies, 50):.2f} s**, p95 "
        f"**{percentile(run.latencies, 95):.2f} s** over {len(run.latencies)} records"
        if run.latencies
        else "no score seen"
    )
    rates = ", ".join(
        f"{backlog / seconds:,.0f}" if 0 < seconds < float("inf") else "-"
        for backlog, seconds in zip(run.backlog, run.drained, strict=True)
    )
    return [
        f"- **Code evaluators at {rate:,} records/s** (3 rules, every record matching; load "
        f"{run.load} when it began): {run.sent:,} records sent in {run.send_seconds:.1f} s "
        f"({run.sent / run.send_seconds:,.0f}/s, {run.late_batches} batches over {PACE:g} s "
        f"late); undecided when the last batch was acknowledged: "
        f"{', '.join(f'{b:,}' for b in run.backlog)} (per rule), all decided {drained} later: "
        f"the worker decided that backlog at {rates} records/s per rule with no ingest beside "
        f"it, the collector spending {run.drain_cpu_ms:.2f} ms of CPU per decision (the rules "
        "keep up when the backlog stays about the worker's half-second settle and poll).",
        f"- **Decision latency** (batch acknowledged -> the first rule's score answering "
        f"`GET /v1/scores?request_id=`, the oldest pending ones polled every 100 ms): {lat}"
        + (f"; {run.unseen} not seen within 120 s" if run.unseen else "")
        + " (target p95 <= 2 s).",
    ]


def reads_lines(run: ReadsRun | None, records: int, targets: int) -> list[str]:
    """The reads part's docs lines."""
    if run is None:
        return []
    rules = ", ".join(f"{n:,}" for n in run.per_rule)
    return [
        f"- **Reads at {run.decisions:,} decisions** of 5 rules ({rules}) over {targets:,} "
        f"targets, {records:,} of them logged records; loaded in {run.load_seconds:.0f} s "
        f"with `INSERT ... SELECT ... FROM numbers()`; load {run.load} when the reads began. "
        "Targets: a rule's page p95 <= 50 ms; a record's evaluations <= 20 ms.",
        "",
        "| operation | p50 ms | p95 ms | collector CPU per request, ms | samples |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {r['operation']} | {r['p50']:.1f} | {r['p95']:.1f} | {r['cpu']:.1f} | "
            f"{r['samples']} |"
            for r in run.results
        ),
    ]


def write_docs(
    args: argparse.Namespace,
    machine: Machine,
    load: str,
    runs: list[IngestRun],
    latency: LatencyRun | None,
    reads: ReadsRun | None,
) -> None:
    """Rewrite the section's measured part (its ``### `` notes stay)."""
    command = (
        f".venv/bin/python benchmarks/evaluation.py --rounds {args.rounds} --records "
        f"{args.records} --rate {args.rate} --seconds {args.seconds:g} --decisions "
        f"{args.decisions}" + (f" --only {args.only}" if args.only else "")
    )
    lines = [
        SECTION,
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine.line()}  ",
        f"Date: {machine.date}; embedded store (chDB), each collector in its own process on a "
        f"fresh data directory; judges call the OpenAI stub answering after "
        f"{DELAY * 1000:.0f} ms; load average before the run: {load} (the machine is shared "
        "with other work: both sides of the ingest ran in turn, and their medians compare).",
        "",
        *ingest_lines(runs),
        *latency_lines(latency, args.rate),
        *reads_lines(reads, args.records_logged, args.targets),
        "",
    ]
    write_section("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds (each side once)")
    parser.add_argument("--records", type=int, default=50_000, help="records per ingest run")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000, help="paced records/s")
    parser.add_argument("--seconds", type=float, default=30.0, help="paced load's length")
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument(
        "--records-logged", type=int, default=100_000, help="records logged for the reads"
    )
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--only", help="ingest, latency or reads (a,b): only those parts")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--load-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--targets", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rules", help=argparse.SUPPRESS)
    parser.add_argument("--evaluators", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load_worker:
        load_decisions(
            args.load_worker,
            args.rules.split(","),
            args.evaluators.split(","),
            args.targets,
            args.records,
        )
        return
    # The 5 rules cover 2.5 of every target on average (COVER): this many targets.
    args.targets = round(args.decisions / sum(COVER))
    parts = set((args.only or "ingest,latency,reads").split(","))
    machine = Machine.current()
    load = load_average()
    print(f"CPU probe {machine.probe_ms:.0f} ms; load average {load}", flush=True)
    began = time.perf_counter()
    runs: list[IngestRun] = []
    latency = reads = None
    with stub_server() as settings:
        if "ingest" in parts:
            print("ingest, with 5 rules and without, in turn:", flush=True)
            runs = measure_ingest(settings, args.rounds, args.records, args.batch, args.workers)
            for line in ingest_lines(runs):
                print(line, flush=True)
        if "latency" in parts:
            print(f"code evaluators at {args.rate:,} records/s:", flush=True)
            latency = measure_latency(settings, args.rate, args.seconds)
            for line in latency_lines(latency, args.rate):
                print(line, flush=True)
    if "reads" in parts:
        print(f"reads at {args.decisions:,} decisions:", flush=True)
        reads = measure_reads(args.records_logged, args.targets, args.samples, args.workers)
        print(f"  decisions per rule: {reads.per_rule}", flush=True)
    print(f"\nwhole run: {time.perf_counter() - began:.0f} s")
    if args.write_docs:
        write_docs(args, machine, load, runs, latency, reads)
        print("wrote docs/benchmarks.md")


if __name__ == "__main__":
    main()
