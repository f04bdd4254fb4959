"""What the audit log adds to a prompt PATCH, in process, on a fresh embedded store.

    .venv/bin/python benchmarks/audit.py [--patches 400] [--write-docs]

One collector app (FastAPI over httpx's ASGI transport: the whole request path, the access
check and the audit hook included, no socket) on a fresh embedded store with one prompt.
``PATCH /v1/prompts/greet`` changes its template, request by request, alternating between the
app as it runs (the hook reads the prompt before and after and appends the entry) and the same
app with its audit service taken away (the hook finds no service and only yields), so both
see the same machine, store and prompt size. Then ``AuditService.record`` alone, call by call
(the append: canonical JSON, SHA-256, one insert). Issue 51's target: the audit append adds
at most 2 ms p50 to a prompt PATCH. ``--write-docs`` writes the figures into the "Audit log"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _report import Machine, finish, generated_head, load_average, write_block

from promptrail.collector.access.principal import ALL_SCOPES, Principal
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings

SECTION_HEADING = "## Audit log (`benchmarks/audit.py`)"
BEGIN_MARK = "<!-- benchmarks/audit.py: begin generated figures -->"
END_MARK = "<!-- benchmarks/audit.py: end generated figures -->"
API_KEY = "pr-bench-" + "0" * 32
WARMUP = 30
TARGET_MS = 2.0
INTRO = (
    "What the audit log adds to a prompt PATCH: the same app with and without its audit\n"
    "service, request by request in turn, over the ASGI transport (no socket); and the append\n"
    "alone (canonical JSON, SHA-256, a journal append). Issue 51's target: the append adds at\n"
    "most 2 ms p50 to a prompt PATCH. A shared machine (other work running): the difference of\n"
    "the two p50s is the figure to read, not either p50 alone."
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def patches(app: Any, count: int) -> tuple[list[float], list[float]]:
    """Time ``count`` PATCHes with the audit log and as many without, alternating."""
    services = app.state.services
    audit = services.audit
    audited: list[float] = []
    bare: list[float] = []
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://bench", headers=headers
    ) as client:
        created = await client.post(
            "/v1/prompts",
            json={"name": "greet", "template": "Hi {{n}} " * 40, "model": "gpt-4o"},
        )
        assert created.status_code == 201, created.text
        for i in range(WARMUP * 2 + count * 2):
            if i % 20 == 0:
                # Untimed: let the journals' appliers catch up, so a burst of PATCHes far
                # faster than people make them does not fill the registry's journal.
                await asyncio.to_thread(services.store.prompts.settle)
                await asyncio.to_thread(audit.store.settle)
            with_audit = i % 2 == 0
            services.audit = audit if with_audit else None
            body = {"template": f"Hello {{{{n}}}} number {i} " + "words " * 60}
            started = time.perf_counter()
            response = await client.patch("/v1/prompts/greet", json=body)
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, response.text
            if i >= WARMUP * 2:
                (audited if with_audit else bare).append(elapsed)
    services.audit = audit
    return audited, bare


def appends(app: Any, count: int) -> list[float]:
    """Time ``count`` appends of an entry the size of a prompt PATCH's."""
    audit = app.state.services.audit
    principal = Principal("default", ALL_SCOPES, None, None, "key_bench")
    before = {"name": "greet", "version": 1, "template": "Hi {{n}} " * 40, "labels": []}
    after = {**before, "version": 2, "template": "Hello {{n}} " * 40}
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        audit.record(principal, "prompt.update", "prompt", "greet", before=before, after=after)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--patches", type=int, default=400)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    began = time.monotonic()
    machine = Machine.current()
    with tempfile.TemporaryDirectory(prefix="promptrail-bench-audit-") as tmp:
        settings = Settings(
            clickhouse_url=f"chdb://{Path(tmp) / 'store'}",
            data_dir=Path(tmp),
            init_api_key=API_KEY,
        )
        app = create_app(settings)

        async def run() -> tuple[list[float], list[float]]:
            async with app.router.lifespan_context(app):
                return await patches(app, args.patches)

        audited, bare = asyncio.run(run())
        # The append alone needs the store open again (the lifespan closed it).
        app = create_app(settings)

        async def run_appends() -> tuple[list[float], Any]:
            async with app.router.lifespan_context(app):
                return appends(app, args.patches), app.state.services.audit.verify()

        appended, verdict = asyncio.run(run_appends())
    load = load_average()
    added = statistics.median(audited) - statistics.median(bare)
    rows = [
        ("PATCH with the audit log", audited),
        ("PATCH without it", bare),
        ("the append alone (record)", appended),
    ]
    table = [
        "| operation | p50 ms | p95 ms | samples |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {percentile(v, 0.5):.2f} | {percentile(v, 0.95):.2f} | {len(v)} |"
            for name, v in rows
        ],
    ]
    summary = "\n".join(
        [
            *table,
            "",
            f"added to a PATCH, p50: {added:.2f} ms (target <= {TARGET_MS:.0f} ms)",
            f"chain verified: {verdict.checked} entries, "
            f"{'no problem' if verdict.problem is None else verdict.problem.reason}",
            f"load average at the end (a shared machine, 2 cores): {load}",
        ]
    )
    command = f"benchmarks/audit.py --patches {args.patches}"

    def write_docs() -> None:
        block = "\n".join(
            [
                *generated_head(BEGIN_MARK, machine, command),
                "",
                summary,
                "",
                END_MARK,
            ]
        )
        write_block(SECTION_HEADING, INTRO, block, BEGIN_MARK, END_MARK)

    finish(summary, time.monotonic() - began, write_docs if args.write_docs else None)
    if added > TARGET_MS or verdict.problem is not None:
        sys.exit(1)


if __name__ == "__main__":
    main()
