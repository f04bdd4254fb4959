"""Reads at 1M, 10M and 100M records (issue 52, point 5), loaded by ClickHouse itself.

    .venv/bin/python benchmarks/scale.py --steps 1000000,10000000,100000000 [--write-docs]
    .venv/bin/python benchmarks/scale.py --data-dir DIR --steps ... [--reuse]

Loading through the API took 27 minutes for 10M records here, so the records go straight into
the store's own schema: ``INSERT INTO requests SELECT ... FROM numbers(...)`` on the embedded
store of a fresh data dir (migrated by a collector first), so every table a real ingest writes
is written the same way, by the same materialised views (the list copy, the id and metadata
indexes, the thread tables, the evaluation arrivals); scores go into ``scores`` alike, with
their sums and by-target views. Each step adds records up to its count and then starts the
collector on the store, waits until it says its analytics rollup caught up (its first round
seals every settled hour, as a collector running all along would have) and measures the reads
users make over HTTP, on one keep-alive connection: the newest page and the next, filters by
prompt, by metadata and by score, a detail, search (a common and a rare word), analytics by day
and by version, a trace, a session, and the trace, session and user lists.

The records (deterministic in their number ``n``, so steps and reruns agree): traces of 10
records (an agent root span, 6 model calls, 2 tool spans, one more call), 5 traces a session
(2 minutes apart), 10 sessions a user (100M records: 10M traces, 2M sessions, 200k users),
sessions spread over 30 days by a hash; 200 prompts with 3 versions, 4 models over 2
providers, 2% errors, `--words` (24) words of input and of output from 2,000 words (one
record in 100,000 holds a rare word), metadata ``user_id``, ``session_id``, ``environment``;
one model call in 10 has a ``helpful`` score. After each step, ``loaded.json`` in the data
dir says what is there, so ``--reuse`` reads again without loading.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _harness import check, collector
from _report import Machine, load_average, wait_quiet, write_section

from promptrail.collector.store.connection import close_client, open_client

KEY = "pr-bench-scale-" + "0" * 24
DATABASE = "promptrail"
SECTION = "## Reads at 100M records (`benchmarks/scale.py`)"
LOADED = "loaded.json"
CHUNK = 500_000
TRACE = 10
TRACES_PER_SESSION = 5
SESSIONS_PER_USER = 10
PROMPTS = 200
RARE = "zyzzogeton"
SPAN_MS = (30 * 24 - 1) * 3600 * 1000
MODELS = (
    ("gpt-4o-mini", "openai"),
    ("gpt-4o", "openai"),
    ("claude-3-5-haiku-latest", "anthropic"),
    ("claude-3-5-sonnet-latest", "anthropic"),
)


def vocabulary() -> list[str]:
    """2,000 made-up words of 3-9 letters (the same on every run)."""
    rng = random.Random(52)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < 2000:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


# A record's fields in SQL, from its number ``n`` (a column of numbers()). ``{start}`` is the
# load's first time in milliseconds since the epoch.
_RECORD = """
WITH
    intDiv(n, {trace}) AS tr,
    n % {trace} AS pos,
    intDiv(tr, {per_session}) AS se,
    intDiv(se, {per_user}) AS us,
    if(pos = 0, 'agent', if(pos IN (3, 6), 'tool', 'llm')) AS kind_of,
    cityHash64('m', tr) % 4 AS mi,
    {models}[mi + 1] AS model_of,
    {providers}[mi + 1] AS provider_of,
    concat('prompt-', leftPad(toString(cityHash64('p', tr) % {prompts}), 3, '0')) AS prompt_of,
    cityHash64('e', n) % 50 = 0 AS failed,
    arrayStringConcat(arrayMap(j -> {vocab}[1 + cityHash64('i', n, j) % length({vocab})],
        range({words})), ' ') AS asked,
    concat(arrayStringConcat(arrayMap(j -> {vocab}[1 + cityHash64('o', n, j) % length({vocab})],
        range({words})), ' '), if(cityHash64('r', n) % 100000 = 0, ' {rare}', '')) AS answered,
    concat('user-', leftPad(toString(us), 6, '0')) AS user_of,
    concat('s-', toString(se)) AS session_of,
    fromUnixTimestamp64Milli(toInt64({start} + cityHash64('s', se) % {span}
        + (tr % {per_session}) * 120000 + pos * 200), 'UTC') AS at,
    50 + cityHash64('t', n) % 500 AS prompt_tokens_of,
    20 + cityHash64('c', n) % 300 AS completion_tokens_of
SELECT
    {project} AS project,
    concat('req_scale', leftPad(toString(n), 12, '0')) AS id,
    at AS created_at,
    if(kind_of = 'llm', prompt_of, '') AS prompt_name,
    toUInt32(if(kind_of = 'llm', 1 + cityHash64('v', tr) % 3, 0)) AS version,
    if(kind_of = 'llm', model_of, '') AS model,
    if(kind_of = 'llm', provider_of, '') AS provider,
    if(failed, 'error', 'success') AS status,
    if(kind_of = 'llm', concat('{{"question":"', asked, '"}}'), '{{}}') AS input_variables,
    '' AS input,
    if(kind_of = 'llm' AND NOT failed,
       concat('{{"role":"assistant","content":"', answered, '"}}'), '{{}}') AS output,
    concat('{{"user_id":"', user_of, '","session_id":"', session_of,
           '","environment":"prod"}}') AS metadata,
    map('user_id', user_of, 'session_id', session_of, 'environment', 'prod') AS metadata_map,
    toUInt32(if(kind_of = 'llm', prompt_tokens_of, 0)) AS prompt_tokens,
    toUInt32(if(kind_of = 'llm' AND NOT failed, completion_tokens_of, 0)) AS completion_tokens,
    prompt_tokens + completion_tokens AS total_tokens,
    (prompt_tokens * 0.15 + completion_tokens * 0.6) / 1e6 AS estimated_cost_usd,
    true AS cost_known,
    toUInt32(200 + cityHash64('l', n) % 3000) AS latency_ms,
    CAST(NULL, 'Nullable(UInt32)') AS time_to_first_token_ms,
    toUInt32(0) AS pre_process_ms,
    toUInt32(0) AS llm_call_ms,
    toUInt32(0) AS post_process_ms,
    '{{}}' AS integration,
    if(failed, 'RateLimitError: rate limit reached', '') AS error,
    leftPad(lower(hex(tr + 1)), 32, '0') AS trace_id,
    leftPad(lower(hex(n + 1)), 16, '0') AS span_id,
    if(pos = 0, '', leftPad(lower(hex(n - pos + 1)), 16, '0')) AS parent_span_id,
    multiIf(pos = 0, 'agent run', kind_of = 'tool', 'tool search', concat('chat ', model_of))
        AS span_name,
    lower(concat(if(kind_of = 'llm', concat(asked, '\\n', answered, '\\n'), ''),
                 user_of, '\\n', session_of, '\\nprod')) AS search_text,
    toUInt8(1) AS row_version,
    toUInt8(0) AS is_deleted,
    if(kind_of = 'agent', 'agent', kind_of) AS kind,
    'production' AS environment
FROM (SELECT number AS n FROM numbers({first}, {count}))
"""

_COLUMNS = (
    "project, id, created_at, prompt_name, version, model, provider, status, input_variables, "
    "input, output, metadata, metadata_map, prompt_tokens, completion_tokens, total_tokens, "
    "estimated_cost_usd, cost_known, latency_ms, time_to_first_token_ms, pre_process_ms, "
    "llm_call_ms, post_process_ms, integration, error, trace_id, span_id, parent_span_id, "
    "span_name, search_text, row_version, is_deleted, kind, environment"
)

# One model call in 10 (by a hash of its number) has a ``helpful`` score, at the record's time.
_SCORES = """
INSERT INTO {db}.scores (project, id, request_id, trace_id, name, data_type, value,
    value_number, value_text, comment, correction, source, metadata, created_at, written_at,
    is_deleted{stamp_column})
SELECT project, concat('score_scale', substring(id, 10)), id, '', 'helpful', 'numeric',
    toString(v), v, '', NULL, NULL, 'api', '{{}}', created_at,
    toDateTime64(created_at, 6, 'UTC'), 0{stamp_value}
FROM (SELECT project, id, created_at, round((cityHash64('h', id) % 101) / 100, 2) AS v
      FROM ({records}) WHERE kind = 'llm' AND cityHash64('k', id) % 10 = 0)
"""


def _sql_array(values: list[str]) -> str:
    return "[" + ",".join("'" + v.replace("'", "\\'") + "'" for v in values) + "]"


def record_sql(project: str, start_ms: int, first: int, count: int, words: int) -> str:
    """The SELECT of records ``first`` .. ``first + count - 1`` in the store's columns, with
    ``words`` words of input and of output each."""
    return _RECORD.format(
        words=words,
        trace=TRACE,
        per_session=TRACES_PER_SESSION,
        per_user=SESSIONS_PER_USER,
        models=_sql_array([m for m, _ in MODELS]),
        providers=_sql_array([p for _, p in MODELS]),
        prompts=PROMPTS,
        vocab=_sql_array(vocabulary()),
        rare=RARE,
        start=start_ms,
        span=SPAN_MS,
        project="'" + project + "'",
        first=first,
        count=count,
    )


def load(data_dir: Path, state: dict[str, Any], want: int) -> float:
    """Add records up to ``want`` (and their scores); return the seconds it took.

    ``loaded.json`` is written after each chunk, so a load stopped between chunks (the process
    killed) goes on from there; a chunk's two inserts are each all or nothing. Merges are
    paused while loading and the load ends once they have caught up: merging parts as they
    come made the load slow down as the store grew (50,000 records/s up to 10M, 11,000 past
    20M while other work ran), where a merge of many parts at the end does each row fewer
    times. The reads then find the store as a collector's ingest leaves it: merged.
    """
    project, start_ms, words = state["project"], state["start_ms"], state["words"]
    have = state["records"]
    client = open_client(f"chdb://{(data_dir / 'clickhouse').resolve()}")
    stamped = _has_record_at(client)
    scores = _SCORES.replace("{stamp_column}", ", record_at" if stamped else "").replace(
        "{stamp_value}", ", created_at" if stamped else ""
    )
    began = time.perf_counter()
    try:
        client.command("SYSTEM STOP MERGES")
        try:
            for first in range(have, want, CHUNK):
                count = min(CHUNK, want - first)
                records = record_sql(project, start_ms, first, count, words)
                client.command(f"INSERT INTO {DATABASE}.requests ({_COLUMNS}) {records}")
                client.command(scores.format(db=DATABASE, records=records))
                done = first + count
                state["records"] = done
                (data_dir / LOADED).write_text(json.dumps(state))
                rate = (done - have) / (time.perf_counter() - began)
                print(f"  loaded {done:,} records ({rate:,.0f}/s)", flush=True)
        finally:
            client.command("SYSTEM START MERGES")
        merged = time.perf_counter()
        # A merge's parts stay on disk for old_parts_lifetime (8 minutes) once merged: merging
        # the whole load at once would hold the store about twice over. Shorter for the wait.
        _set_parts_lifetime(client, "MODIFY SETTING old_parts_lifetime = 20")
        try:
            _wait_merged(client)
        finally:
            _set_parts_lifetime(client, "RESET SETTING old_parts_lifetime")
        print(f"  merged in {time.perf_counter() - merged:.0f} s", flush=True)
    finally:
        close_client(client)
    return time.perf_counter() - began


def _has_record_at(client: Any) -> bool:
    """Whether the store's scores carry ``record_at`` (migration 42: the scored record's time,
    which keys the score sums; a score written through the API gets its record's)."""
    rows = client.query(
        "SELECT count() FROM system.columns WHERE database = {db:String} AND table = 'scores' "
        "AND name = 'record_at'",
        parameters={"db": DATABASE},
    ).result_rows
    return bool(rows[0][0])


def _set_parts_lifetime(client: Any, change: str) -> None:
    """Apply ``change`` to every MergeTree table of the store."""
    tables = client.query(
        "SELECT name FROM system.tables WHERE database = {db:String} AND engine LIKE '%MergeTree'",
        parameters={"db": DATABASE},
    ).result_rows
    for (table,) in tables:
        client.command(f"ALTER TABLE {DATABASE}.`{table}` {change}")


def _wait_merged(client: Any) -> None:
    """Wait until no merge has run for 10 s, printing the active parts left now and then."""
    idle_since = time.monotonic()
    shown = 0.0
    while time.monotonic() - idle_since < 10:
        time.sleep(1)
        ((merges,),) = client.query("SELECT count() FROM system.merges").result_rows
        if merges:
            idle_since = time.monotonic()
        if time.monotonic() - shown >= 30:
            shown = time.monotonic()
            ((parts,),) = client.query(
                "SELECT count() FROM system.parts WHERE database = {db:String} AND active",
                parameters={"db": DATABASE},
            ).result_rows
            print(f"  merging: {merges} merges running, {parts:,} active parts", flush=True)


def sizes(data_dir: Path) -> list[dict[str, Any]]:
    """Bytes per table (compressed and not) and rows, from system.parts."""
    client = open_client(f"chdb://{(data_dir / 'clickhouse').resolve()}")
    try:
        rows = client.query(
            "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes) "
            "FROM system.parts WHERE database = {db:String} AND active GROUP BY table "
            "ORDER BY sum(data_compressed_bytes) DESC",
            parameters={"db": DATABASE},
        ).result_rows
    finally:
        close_client(client)
    return [
        {"table": t, "rows": int(r), "compressed": int(c), "uncompressed": int(u)}
        for t, r, c, u in rows
    ]


def measure(
    client: httpx.Client, samples: int, make: Callable[[int], tuple[str, dict[str, Any]]]
) -> tuple[float, float]:
    """p50 and p95 in ms of ``samples`` GETs (after 3 warm-up ones)."""
    times = []
    for i in range(samples + 3):
        path, params = make(i)
        began = time.perf_counter()
        check(client.get(path, params=params))
        if i >= 3:
            times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.95))]


def reads(
    base: str, records: int, samples: int, only: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Each read users make (those whose name starts with one of ``only``, when given), over
    one keep-alive connection."""
    rng = random.Random(7)
    words = vocabulary()
    traces = records // TRACE
    sessions = max(1, traces // TRACES_PER_SESSION)
    users = max(1, sessions // SESSIONS_PER_USER)
    results: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        second = check(client.get("/v1/requests", params={"limit": 20})).json()["pagination"][
            "next_cursor"
        ]

        def prompt() -> str:
            return f"prompt-{rng.randrange(PROMPTS):03d}"

        ops: list[tuple[str, Callable[[int], tuple[str, dict[str, Any]]], int]] = [
            ("newest page (20)", lambda i: ("/v1/requests", {"limit": 20}), samples),
            (
                "next page (cursor)",
                lambda i: ("/v1/requests", {"limit": 20, "cursor": second}),
                samples,
            ),
            ("by prompt_name", lambda i: ("/v1/requests", {"prompt_name": prompt()}), samples),
            (
                "by metadata.user_id",
                lambda i: (
                    "/v1/requests",
                    {"metadata.user_id": f"user-{rng.randrange(users):06d}"},
                ),
                samples,
            ),
            (
                "by score (helpful >= 0.9)",
                lambda i: ("/v1/requests", {"score.helpful.min": 0.9}),
                samples,
            ),
            (
                "detail",
                lambda i: (f"/v1/requests/req_scale{rng.randrange(records):012d}", {}),
                samples,
            ),
            (
                "search, common word",
                lambda i: ("/v1/requests/search", {"query": rng.choice(words)}),
                max(10, samples // 5),
            ),
            (
                "search, rare word",
                lambda i: ("/v1/requests/search", {"query": RARE}),
                max(10, samples // 5),
            ),
            (
                "analytics cost by day (30 days)",
                lambda i: ("/v1/requests/analytics", {"metric": "cost", "group_by": "day"}),
                max(10, samples // 5),
            ),
            (
                "analytics latency by version (one prompt)",
                lambda i: (
                    "/v1/requests/analytics",
                    {"metric": "latency", "group_by": "version", "prompt_name": prompt()},
                ),
                max(10, samples // 5),
            ),
            (
                "one trace (10 records)",
                lambda i: (f"/v1/traces/{rng.randrange(1, traces + 1):032x}", {}),
                samples,
            ),
            (
                "one session (5 traces)",
                lambda i: (f"/v1/sessions/s-{rng.randrange(sessions)}", {}),
                samples,
            ),
            ("trace list, newest 20", lambda i: ("/v1/traces", {}), samples),
            ("session list, newest 20", lambda i: ("/v1/sessions", {}), samples),
            ("user list, newest 20", lambda i: ("/v1/users", {}), samples),
        ]
        for name, make, count in ops:
            if only and not name.startswith(only):
                continue
            p50, p95 = measure(client, count, make)
            print(f"  {name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms", flush=True)
            results.append({"operation": name, "p50": p50, "p95": p95, "samples": count})
    return results


def first_start(data_dir: Path) -> dict[str, Any]:
    """Migrate a fresh store and make its key (a collector's first start), log one record
    through the API and read back the project it was stored under."""
    with collector(data_dir, KEY) as running:
        record = {"model": "gpt-4o-mini", "input_variables": {"q": "first"}, "output": {}}
        check(
            httpx.post(
                f"{running.url}/v1/requests/batch",
                json={"records": [record]},
                headers={"Authorization": f"Bearer {KEY}"},
            ),
            201,
        )
        time.sleep(2)  # the group commit's flush
    client = open_client(f"chdb://{(data_dir / 'clickhouse').resolve()}")
    try:
        (project,) = client.query(f"SELECT any(project) FROM {DATABASE}.requests").result_rows[0]
    finally:
        close_client(client)
    start = datetime.now(UTC) - timedelta(days=30)
    return {"records": 0, "start_ms": int(start.timestamp() * 1000), "project": str(project)}


def room_for(data_dir: Path, state: dict[str, Any], want: int) -> None:
    """Stop before a load that would fill the disk: the bytes per record the store holds now
    (after a first step), times the records to add, must leave 5% of the disk free (merges
    choose parts within half the free space, so they do not fill it: the margin is for other
    writers)."""
    if state["records"] < 100_000:
        return
    held = sum(t["compressed"] for t in sizes(data_dir)) / state["records"]
    need = held * (want - state["records"])
    usage = shutil.disk_usage(data_dir)
    if usage.free - need < usage.total * 0.05:
        raise SystemExit(
            f"{want:,} records need ~{_size(need)} more at {held:.0f} B a record, and "
            f"{_size(usage.free)} is free: use fewer --words, or a bigger disk"
        )


def _size(value: float) -> str:
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


def section(machine: Machine, command: str, report: list[dict[str, Any]]) -> str:
    """The docs section: reads by step side by side, then bytes per record by table."""
    steps = [r["records"] for r in report]
    head = " | ".join(f"{n:,}: p50 / p95" for n in steps)
    lines = [
        SECTION,
        "",
        f"- Machine: {machine.line()}",
        f"- Date: {machine.date}; command: `{command}`; {report[-1]['words']} words of input "
        "and of output a model call",
        *[f"- {n:,} records: {r['note']}" for n, r in zip(steps, report, strict=True)],
        "",
        f"| read (ms) | {head} |",
        "|---|" + "---|" * len(steps),
    ]
    names = [r["operation"] for r in report[0]["reads"]]
    for index, name in enumerate(names):
        cells = " | ".join(
            f"{r['reads'][index]['p50']:.1f} / {r['reads'][index]['p95']:.1f}" for r in report
        )
        lines.append(f"| {name} | {cells} |")
    last = report[-1]
    lines += [
        "",
        f"Bytes per record at {last['records']:,} records (active parts):",
        "",
        "| table | rows | compressed | uncompressed | compressed per record |",
        "|---|---|---|---|---|",
    ]
    for t in last["sizes"]:
        per = t["compressed"] / max(1, last["records"])
        lines.append(
            f"| {t['table']} | {t['rows']:,} | {_size(t['compressed'])} | "
            f"{_size(t['uncompressed'])} | {per:.0f} B |"
        )
    return "\n".join(lines) + "\n"


def log_size(data_dir: Path) -> int:
    """Where the collector's log ends now (its next start's lines come after)."""
    path = data_dir / "collector.log"
    return path.stat().st_size if path.exists() else 0


def wait_sealed(data_dir: Path, since: int, longest: float) -> float:
    """Wait until the collector says its analytics rollup caught up (its first round after
    the start sealed every settled hour and day, as a collector running all along would have);
    the seconds waited, or -1 after ``longest`` seconds.

    Before that the records loaded behind its back are read from the log by analytics: the
    reads would measure a state no running collector stays in.
    """
    path = data_dir / "collector.log"
    began = time.monotonic()
    while time.monotonic() - began < longest:
        with path.open("rb") as log:
            # The collector's start may have begun the log afresh.
            log.seek(since if path.stat().st_size >= since else 0)
            if b"rollup: caught up" in log.read():
                return time.monotonic() - began
        time.sleep(1)
    return -1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", default="1000000,10000000,100000000")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--reuse", action="store_true", help="read what is loaded, load nothing")
    parser.add_argument(
        "--wait", type=float, default=300.0, help="longest wait for a quiet machine (s)"
    )
    parser.add_argument("--words", type=int, default=24, help="words of input and of output")
    parser.add_argument(
        "--reads",
        default="",
        help="only the reads whose name starts with one of these, comma-separated "
        "(e.g. 'newest,by '); not with --write-docs",
    )
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    only = tuple(part for part in args.reads.split(",") if part)
    if only and args.write_docs:
        parser.error("--reads measures some reads only: the docs' tables need them all")
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="promptrail-scale-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    state_path = data_dir / LOADED
    if state_path.exists():
        state: dict[str, Any] = json.loads(state_path.read_text())
    else:
        state = {**first_start(data_dir), "words": args.words}
        state_path.write_text(json.dumps(state))
    machine = Machine.current()
    print(machine.line(), f"data dir {data_dir}", flush=True)
    report: list[dict[str, Any]] = []
    for step in steps:
        note = "read again"
        if step > state["records"] and not args.reuse:
            room_for(data_dir, state, step)
            before = state["records"]
            seconds = load(data_dir, state, step)
            note = f"{step - before:,} added in {seconds:.0f} s (merges included)"
            print(f"step {step:,}: {note}", flush=True)
        log_at = log_size(data_dir)
        with collector(data_dir, KEY) as running:
            sealed = wait_sealed(data_dir, log_at, args.wait)
            waited, busy = wait_quiet(max_seconds=args.wait)
            note += f"; rollup caught up after {sealed:.0f} s" if sealed >= 0 else ""
            note += f"; reads after a {waited:.0f} s wait (CPU {busy:.0%}, load {load_average()})"
            print(f"step {step:,}: {note}", flush=True)
            results = reads(running.url, state["records"], args.samples, only)
        report.append(
            {
                "words": state["words"],
                "records": state["records"],
                "note": note,
                "reads": results,
                "sizes": sizes(data_dir),
            }
        )
    command = f"benchmarks/scale.py --steps {args.steps} --words {state['words']}"
    text = section(machine, command, report)
    print(text)
    if args.write_docs:
        write_section(text)


if __name__ == "__main__":
    main()
