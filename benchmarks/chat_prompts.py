"""Benchmark of chat prompts: their template by label over HTTP beside text templates', and the
SDK's ``compile``, ``openai_kwargs`` and ``anthropic_kwargs``.

Command (what ``make bench`` runs)::

    .venv/bin/python benchmarks/chat_prompts.py --prompts 10000

It starts ``promptrail serve`` as a subprocess on a fresh data directory and loads ``--prompts``
prompts through ``POST /v1/prompts`` with 8 concurrent clients, every one labelled
``production``: half chat prompts (a system message of 200-1,500 characters with Mustache
variables and a section, a history placeholder, a user message, two tools, a JSON-schema answer
and a variables schema), half text prompts of the same size. Then, one request at a time over one
keep-alive connection (the standard library's ``http.client``), it times
``GET /v1/prompts/{name}/versions/by-label/production/template`` for chat and text prompts in
turn, request by request, so both see the same machine: on prompts never asked for before
("cold": past the collector's in-memory version cache) and on a working set of 20 of each
("hot"). Then the SDK part, in this process: ``client.prompts.template`` fetches a chat prompt of
6 messages using 10 variables, and ``compile``, ``openai_kwargs`` and ``anthropic_kwargs`` are
timed call by call. Issue 48's targets: a chat template by label p95 <= 1 ms at 10,000 prompts;
``compile`` of that prompt p50 <= 50 µs.
``--write-docs`` writes the figures into the "Chat prompts" section of docs/benchmarks.md.
The collector gets SIGTERM at the end, on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from _harness import check, collector
from _report import Machine, finish, generated_head, random_words, wait_quiet, write_block
from prompts import WORDS, ColdNames, StdlibClient, _terminate, percentile

import promptrail

SECTION_HEADING = "## Chat prompts (`benchmarks/chat_prompts.py`)"
BEGIN_MARK = "<!-- benchmarks/chat_prompts.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/chat_prompts.py: end generated figures -->"
API_KEY = "pr-bench-" + "0" * 32
LOAD_WORKERS = 8
WARMUP = 50
SEED = 20261129
REQUEST_TIMEOUT = 60.0
HOT_NAMES = 20
LABEL = "production"
# Issue 48's targets.
TEMPLATE_TARGET_MS = 1.0
COMPILE_TARGET_US = 50.0
SDK_CALLS = 20_000
SDK_WARMUP = 500
COMPILE_PROMPT = "bench-compile-six-messages"

MODELS = ("gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest")
VARIABLES = ("product", "customer", "language", "tone", "plan", "region")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_order",
        "description": "An order by its number.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "string"}},
            "required": ["number"],
        },
    },
}
ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "reply",
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
            "required": ["answer", "confidence"],
        },
    },
}


# -- data --------------------------------------------------------------------------------


def _text(rng: random.Random, variables: Sequence[str], mustache: bool) -> str:
    """200-1,500 characters of instructions with ``variables`` placed at random."""
    words = random_words(rng, WORDS, rng.randint(200, 1500))
    for variable in variables:
        words.insert(
            rng.randint(0, len(words)), f"{{{{{variable}}}}}" if mustache else f"{{{variable}}}"
        )
    return " ".join(words)


def chat_body(name: str, rng: random.Random) -> dict[str, Any]:
    """A chat prompt as an app stores it: system text with variables and a section, a history
    placeholder, the question, two tools, a JSON-schema answer, a variables schema."""
    variables = rng.sample(VARIABLES, rng.randint(1, 3))
    system = _text(rng, variables, mustache=True) + " {{#vip}}Answer first, in one line.{{/vip}}"
    properties = {v: {"type": "string"} for v in [*variables, "question"]}
    return {
        "name": name,
        "type": "chat",
        "model": rng.choice(MODELS),
        "messages": [
            {"role": "system", "content": system},
            {"type": "placeholder", "name": "history"},
            {"role": "user", "content": "{{question}}"},
        ],
        "tools": [WEATHER_TOOL, ORDER_TOOL],
        "tool_choice": "auto",
        "response_format": ANSWER_FORMAT,
        "variables_schema": {
            "type": "object",
            "properties": {**properties, "vip": {"type": "boolean"}},
            "required": [*variables, "question"],
        },
        "parameters": {"temperature": round(rng.uniform(0, 1), 2), "max_tokens": 512},
        "labels": [LABEL],
    }


def text_body(name: str, rng: random.Random) -> dict[str, Any]:
    """A text prompt of the same size, with 1-3 ``{variables}``."""
    variables = rng.sample(VARIABLES, rng.randint(1, 3))
    return {
        "name": name,
        "template": _text(rng, variables, mustache=False),
        "model": rng.choice(MODELS),
        "parameters": {"temperature": round(rng.uniform(0, 1), 2), "max_tokens": 512},
        "labels": [LABEL],
    }


@dataclass(frozen=True)
class Loaded:
    """The prompts loaded: the names of each type, and how long the load took."""

    chat: list[str]
    text: list[str]
    seconds: float


def load(base_url: str, count: int, deadline: float) -> Loaded:
    """Create ``count`` prompts, half chat and half text, each labelled, from 8 clients."""
    rng = random.Random(SEED)
    bodies = [
        chat_body(f"chat-{i:06d}", rng) if i % 2 == 0 else text_body(f"text-{i:06d}", rng)
        for i in range(count)
    ]
    done = [0]
    lock = threading.Lock()
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=LOAD_WORKERS, max_keepalive_connections=LOAD_WORKERS)

    def create(body: dict[str, Any]) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark ran past --max-seconds while loading")
        check(client.post("/v1/prompts", json=body), 201)
        with lock:
            done[0] += 1
            if done[0] % 1000 == 0 or done[0] == count:
                elapsed = time.perf_counter() - started
                print(f"  loaded {done[0]:>7,}/{count:,} prompts  {elapsed:7.1f} s", flush=True)

    with (
        httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=REQUEST_TIMEOUT,
            limits=limits,
        ) as client,
        ThreadPoolExecutor(max_workers=LOAD_WORKERS) as pool,
    ):
        futures: list[Future[None]] = [pool.submit(create, body) for body in bodies]
        try:
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in finished:
                future.result()
        finally:
            for future in futures:
                future.cancel()
    names = [str(b["name"]) for b in bodies]
    return Loaded(
        [n for n in names if n.startswith("chat-")],
        [n for n in names if n.startswith("text-")],
        time.perf_counter() - started,
    )


# -- HTTP reads --------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """The timings of one measured thing, and its target."""

    label: str
    samples: list[float]
    unit: str  # "ms" or "µs"
    target: float | None = None
    at: int = 95  # the percentile the target bounds

    def p(self, q: float) -> float:
        return percentile(self.samples, q)

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "-"
        met = "met" if self.p(self.at) <= self.target else "MISSED"
        return f"p{self.at} <= {self.target:g} {self.unit}: {met}"


def label_path(name: str) -> str:
    return f"/v1/prompts/{name}/versions/by-label/{LABEL}/template"


def measure_reads(
    client: StdlibClient,
    pairs: Sequence[tuple[str, Callable[[], str], str, Callable[[], str]]],
    samples: int,
    deadline: float,
) -> list[Figure]:
    """Time each pair's chat and text requests in turn, request by request."""
    figures: list[Figure] = []
    for label, chat_name, text_label, text_name in pairs:
        chat: list[float] = []
        text: list[float] = []
        for i in range(WARMUP + samples):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the benchmark ran past --max-seconds measuring {label}")
            for names, timings in ((chat_name, chat), (text_name, text)):
                path = label_path(names())
                started = time.perf_counter()
                response = client.get(path)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"GET {path} -> {response.status_code}: {response.text}")
                if i >= WARMUP:
                    timings.append(elapsed)
        figures += [
            Figure(label, chat, "ms", TEMPLATE_TARGET_MS),
            Figure(text_label, text, "ms", TEMPLATE_TARGET_MS),
        ]
        for figure in figures[-2:]:
            print(
                f"  {figure.label:<34} p50 {figure.p(50):6.2f} ms  p95 {figure.p(95):6.2f} ms",
                flush=True,
            )
    return figures


# -- the SDK -----------------------------------------------------------------------------

# Six messages using ten variables: a system message with a section, a few-shot exchange, a
# user message of text parts and an image whose URL is a variable.
SIX_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are {{agent}}, support agent of {{product}} for {{customer.name}} "
        "({{customer.plan}} plan). Answer in {{language}}, {{tone}}."
        "{{#vip}} This customer is a priority: answer first, in one line.{{/vip}}",
    },
    {"role": "user", "content": "Where is my order?"},
    {"role": "assistant", "content": "Let me look it up for you, {{customer.name}}."},
    {"role": "user", "content": "It is order {{order}}, placed on {{date}} in {{region}}."},
    {"role": "assistant", "content": "Thanks. Anything else about {{product}}?"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "{{question}}"},
            {"type": "image_url", "image_url": {"url": "https://example.com/{{order}}.png"}},
        ],
    },
]
SIX_VALUES: dict[str, Any] = {
    "agent": "Ada",
    "product": "promptrail",
    "customer": {"name": "Grace", "plan": "team"},
    "language": "English",
    "tone": "warmly",
    "vip": True,
    "order": "A-1042",
    "region": "Europe",
    "question": "When will it arrive?",
    "date": "2026-11-20",
}


def sdk_figures(base_url: str) -> list[Figure]:
    """Fetch the six-message chat template with the SDK, then time compile and the kwargs."""
    with promptrail.Client(api_key=API_KEY, base_url=base_url) as client:
        client.prompts.create(
            COMPILE_PROMPT,
            model="gpt-4o-mini",
            messages=SIX_MESSAGES,
            tools=[WEATHER_TOOL, ORDER_TOOL],
            response_format=ANSWER_FORMAT,
            parameters={"temperature": 0.2, "max_tokens": 300},
            labels=[LABEL],
        )
        template = client.prompts.template(COMPILE_PROMPT, label=LABEL)
    used = set(template.variables)
    assert len(SIX_MESSAGES) == 6 and len(used) == 10, sorted(used)

    def timed(label: str, work: Callable[[], object], target: float | None) -> Figure:
        for _ in range(SDK_WARMUP):
            work()
        samples = []
        clock = time.perf_counter_ns
        for _ in range(SDK_CALLS):
            began = clock()
            work()
            samples.append((clock() - began) / 1000)
        figure = Figure(label, samples, "µs", target, at=50)
        print(f"  {label:<34} p50 {figure.p(50):6.1f} µs  p95 {figure.p(95):6.1f} µs", flush=True)
        return figure

    return [
        timed("compile", lambda: template.compile(**SIX_VALUES), COMPILE_TARGET_US),
        timed("openai_kwargs", lambda: template.openai_kwargs(**SIX_VALUES), None),
        timed("anthropic_kwargs", lambda: template.anthropic_kwargs(**SIX_VALUES), None),
    ]


# -- reporting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Everything a run produced."""

    command: str
    machine: Machine
    prompts: int
    samples: int
    loaded: Loaded
    reads: list[Figure]
    sdk: list[Figure]
    total_seconds: float
    load_average: float
    busy: float


def table(figures: Sequence[Figure]) -> str:
    """The figures as an aligned plain-text table."""
    rows = [("what", "p50", "p95", "p99", "target")]
    rows += [
        (
            f.label,
            f"{f.p(50):.2f} {f.unit}",
            f"{f.p(95):.2f} {f.unit}",
            f"{f.p(99):.2f} {f.unit}",
            f.verdict,
        )
        for f in figures
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(widths[i]) if i in (0, 4) else c.rjust(widths[i]) for i, c in enumerate(r)
        ).rstrip()
        for r in rows
    )


def markdown(report: Report) -> str:
    """The generated block of the docs section."""
    loaded = report.loaded
    count = len(loaded.chat) + len(loaded.text)
    lines = [
        *generated_head(BEGIN_MARK, report.machine, report.command),
        f"- Whole run (start, load, measure, stop): {report.total_seconds:.0f} s; CPUs "
        f"{report.busy:.0%} busy over the 5 s before the reads; 1-minute load average then: "
        f"{report.load_average:.2f}",
        "",
        f"**Load.** {count:,} prompts ({len(loaded.chat):,} chat, {len(loaded.text):,} text, "
        f"each labelled `{LABEL}`) in {loaded.seconds:.1f} s from {LOAD_WORKERS} clients: "
        f"{count / loaded.seconds:.1f} prompts/s.",
        "",
        f"**Template by label** (`GET /v1/prompts/{{name}}/versions/by-label/{LABEL}/template`) "
        f"at {count:,} prompts, {report.samples} requests of each kind after {WARMUP} warm-up "
        "ones, chat and text in turn on one keep-alive connection (the standard library "
        "http.client):",
        "",
        "| prompts | p50 ms | p95 ms | p99 ms | target |",
        "|---|---:|---:|---:|---|",
        *[
            f"| {f.label} | {f.p(50):.2f} | {f.p(95):.2f} | {f.p(99):.2f} | {f.verdict} |"
            for f in report.reads
        ],
        "",
        f"**SDK** (this process; a chat template of 6 messages using 10 variables, fetched by "
        f"`client.prompts.template`), {SDK_CALLS:,} calls each after {SDK_WARMUP} warm-up ones:",
        "",
        "| call | p50 µs | p95 µs | p99 µs | target |",
        "|---|---:|---:|---:|---|",
        *[
            f"| `{f.label}` | {f.p(50):.1f} | {f.p(95):.1f} | {f.p(99):.1f} | {f.verdict} |"
            for f in report.sdk
        ],
        "",
        END_MARK,
    ]
    return "\n".join(lines)


SECTION_INTRO = """\
A collector started as its own process (`promptrail serve`) on a fresh embedded store, driven
over real HTTP, and the SDK in the benchmark's own process. The script loads the prompts
through `POST /v1/prompts` (8 concurrent clients), half chat prompts (a system message of
200-1,500 characters with Mustache variables and a section, a history placeholder, the user's
question, two tools, a JSON-schema answer and a variables schema) and half text prompts of the
same size, all labelled `production`. It then times the template by label of chat and text
prompts in turn, request by request, so the two see the same machine: "cold" on prompts never
asked for before (past the collector's in-memory version cache), "hot" on 20 of each. Then
`compile`, `openai_kwargs` and `anthropic_kwargs` of a 6-message chat template using 10
variables (a section, dotted names, a text part and an image URL among them), call by call.
Targets (issue 48): a chat template by label p95 <= 1 ms at 10,000 prompts; `compile` p50 <=
50 µs.

Rerun, and rewrite the figures below:

```bash
.venv/bin/python benchmarks/chat_prompts.py --prompts 10000 --write-docs
```
"""


def write_docs(report: Report) -> None:
    """Replace the generated block of the chat prompts section (creating what is missing)."""
    write_block(SECTION_HEADING, SECTION_INTRO, markdown(report), BEGIN_MARK, END_MARK)


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompts", type=int, default=10_000, help="prompts to load [10000]")
    parser.add_argument("--samples", type=int, default=500, help="requests measured per kind [500]")
    parser.add_argument(
        "--write-docs", action="store_true", help="write the figures into docs/benchmarks.md"
    )
    parser.add_argument(
        "--max-quiet-wait",
        type=float,
        default=900,
        help="seconds to wait for a quiet machine before measuring anyway [900]",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=3600, help="give up after this long [3600]"
    )
    args = parser.parse_args(argv)
    if args.prompts < 2 or args.samples < 1:
        parser.error("--prompts must be at least 2 and --samples positive")
    return args


def run(args: argparse.Namespace, data_dir: Path) -> Report:
    """Start the collector, load, measure, stop; return the report."""
    started = time.perf_counter()
    deadline = time.monotonic() + args.max_seconds
    print(f"starting the collector, data in {data_dir}", flush=True)
    with collector(data_dir, API_KEY) as served:
        print(f"  healthy after {time.perf_counter() - started:.1f} s", flush=True)
        print(f"loading {args.prompts:,} prompts", flush=True)
        loaded = load(served.url, args.prompts, deadline)
        _, busy = wait_quiet(max_seconds=args.max_quiet_wait)
        load_average = os.getloadavg()[0]
        rng = random.Random(SEED + 1)
        per_kind = WARMUP + args.samples
        chat_names = rng.sample(loaded.chat, len(loaded.chat))
        text_names = rng.sample(loaded.text, len(loaded.text))
        hot_chat, hot_text = chat_names[:HOT_NAMES], text_names[:HOT_NAMES]
        # Cold names never repeat while the pool lasts (the hot ones are left out of it).
        cold_chat = ColdNames(chat_names[HOT_NAMES:][:per_kind] or chat_names, rng)
        cold_text = ColdNames(text_names[HOT_NAMES:][:per_kind] or text_names, rng)
        print(f"measuring {args.samples} requests of each kind (+{WARMUP} warm-up)", flush=True)
        client = StdlibClient(served.url, {"Authorization": f"Bearer {API_KEY}"}, REQUEST_TIMEOUT)
        try:
            reads = measure_reads(
                client,
                [
                    ("chat (cold)", cold_chat, "text (cold)", cold_text),
                    (
                        f"chat ({HOT_NAMES} hot)",
                        lambda: rng.choice(hot_chat),
                        f"text ({HOT_NAMES} hot)",
                        lambda: rng.choice(hot_text),
                    ),
                ],
                args.samples,
                deadline,
            )
        finally:
            client.close()
        print("the SDK", flush=True)
        sdk = sdk_figures(served.url)
    return Report(
        command=f".venv/bin/python benchmarks/chat_prompts.py --prompts {args.prompts}"
        + (f" --samples {args.samples}" if args.samples != 500 else ""),
        machine=Machine.current(),
        prompts=args.prompts,
        samples=args.samples,
        loaded=loaded,
        reads=reads,
        sdk=sdk,
        total_seconds=time.perf_counter() - started,
        load_average=load_average,
        busy=busy,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status."""
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    data_dir = Path(tempfile.mkdtemp(prefix="promptrail-bench-chat-"))
    try:
        report = run(args, data_dir)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    summary = f"{table(report.reads)}\n\n{table(report.sdk)}"
    finish(summary, report.total_seconds, partial(write_docs, report) if args.write_docs else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
