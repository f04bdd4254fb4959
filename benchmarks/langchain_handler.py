"""LangChain: the time promptrail's callback handler adds per call, next to Langfuse's.

    python benchmarks/langchain_handler.py [--calls 3000] [--write-docs]

Langfuse is not one of promptrail's dependencies: run it with a Python that has it, kept
apart from the project's venv, e.g. a venv under /tmp that sees the project's packages:

    python -m venv /tmp/bench-langfuse
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/bench-langfuse/lib/python3.11/site-packages/shared.pth
    /tmp/bench-langfuse/bin/pip install langfuse
    PYTHONPATH=src /tmp/bench-langfuse/bin/python benchmarks/langchain_handler.py --write-docs

The call is an LCEL chain (a chat prompt, ``ChatOpenAI``, an output parser: four runs, one
model call) through the real ``openai`` SDK on an in-process, zero-latency transport, so the
figures are the handlers' own cost. Three modes, interleaved in blocks: no handler;
promptrail (its handler in the call's callbacks, with ``promptrail.instrument("openai")`` on
as an application would have it); Langfuse's ``langfuse.langchain.CallbackHandler``. Both
ship to an in-process stand-in that accepts everything (promptrail: a mock transport;
Langfuse: a local HTTP server answering 200), so neither pays for a network.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import httpx2
from _harness import COMPLETION  # the same chat completion as the SDK overhead figures
from _report import Machine, write_block
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

import promptrail
from promptrail.integrations.langchain import CallbackHandler

SECTION = "## LangChain callback handler (`benchmarks/langchain_handler.py`)"
BEGIN, END = "<!-- langchain_handler: begin -->", "<!-- langchain_handler: end -->"


def chain() -> Any:
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=COMPLETION, headers={"content-type": "application/json"}
        )
    )
    model = ChatOpenAI(  # type: ignore[call-arg]
        model="gpt-4o-mini",
        api_key="sk-bench",
        base_url="http://provider.invalid/v1",
        http_client=httpx2.Client(transport=transport),
    )
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), ("human", "{question}")])
    return prompt | model | StrOutputParser()


class _Accept(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def langfuse_handler() -> Any | None:
    """Langfuse's handler, shipping to a local server that accepts everything; None if absent."""
    try:
        from langfuse import Langfuse
        from langfuse.langchain import CallbackHandler as LangfuseHandler
    except ImportError:
        return None
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accept)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Langfuse(
        public_key="pk-bench",
        secret_key="sk-bench",
        base_url=f"http://127.0.0.1:{server.server_port}",
    )
    return LangfuseHandler(public_key="pk-bench")


def measure(calls: int) -> dict[str, Any]:
    accept = httpx.MockTransport(
        lambda request: httpx.Response(201, json={"data": {"accepted": 1, "rejected": []}})
    )
    promptrail.init(api_key="k", transport=accept, flush_interval=0.2)
    promptrail.uninstrument("langchain")  # handlers go in each call's config, the same way
    handlers: dict[str, Any] = {"plain": None, "promptrail": CallbackHandler()}
    langfuse = langfuse_handler()
    if langfuse is not None:
        handlers["langfuse"] = langfuse
    runnable = chain()
    inputs = {"question": "Say hello."}

    def call(mode: str) -> None:
        handler = handlers[mode]
        runnable.invoke(inputs, config={"callbacks": [handler] if handler else []})

    def use(mode: str) -> None:
        if mode == "promptrail":
            promptrail.instrument("openai")
        else:
            promptrail.uninstrument("openai")

    modes = list(handlers)
    samples: dict[str, list[float]] = {mode: [] for mode in modes}
    # Per round, the difference of the block medians: paired rounds cancel the drift of a
    # shared machine.
    differences: dict[str, list[float]] = {mode: [] for mode in modes if mode != "plain"}
    for mode in modes:  # warm up every path
        use(mode)
        for _ in range(30):
            call(mode)
    block = 30
    for number, start in enumerate(range(0, calls, block)):
        medians: dict[str, float] = {}
        for mode in modes[number % len(modes) :] + modes[: number % len(modes)]:
            use(mode)
            call(mode)
            timings = []
            for _ in range(min(block, calls - start)):
                began = time.perf_counter_ns()
                call(mode)
                timings.append((time.perf_counter_ns() - began) / 1000)
            samples[mode].extend(timings)
            medians[mode] = statistics.median(timings)
        for mode, sink in differences.items():
            sink.append(medians[mode] - medians["plain"])
    promptrail.flush(timeout=10)
    stats = promptrail.stats()
    promptrail.shutdown()
    return {
        "p50": {mode: statistics.median(values) for mode, values in samples.items()},
        "added": {mode: statistics.median(values) for mode, values in differences.items()},
        "exported": stats.get("exported", 0),
        "langfuse_version": _langfuse_version() if langfuse is not None else None,
    }


def _langfuse_version() -> str:
    from importlib.metadata import version

    return version("langfuse")


def report(result: dict[str, Any], calls: int) -> str:
    p50, added = result["p50"], result["added"]
    machine = Machine.current()
    langfuse = result["langfuse_version"]
    lines = [
        f"{machine.date}; {machine.line()}; {calls} calls per mode; promptrail exported "
        f"{result['exported']:,} records; {f'langfuse {langfuse}' if langfuse else 'Langfuse not installed'}.",
        "",
        "| per chain call (4 runs, 1 model call) | p50 | added (median of paired block differences) |",
        "|---|---|---|",
        f"| no handler | {p50['plain']:.0f} µs | |",
        f"| promptrail `CallbackHandler` (+ openai patch, standing aside) | {p50['promptrail']:.0f} µs | {added['promptrail']:.0f} µs |",
    ]
    if "langfuse" in added:
        ratio = added["promptrail"] / added["langfuse"] if added["langfuse"] else float("nan")
        lines.append(
            f"| Langfuse `langfuse.langchain.CallbackHandler` | {p50['langfuse']:.0f} µs | {added['langfuse']:.0f} µs |"
        )
        lines += ["", f"promptrail adds {ratio:.0%} of what Langfuse adds (target: under 50%)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("LANGFUSE_TRACING_ENVIRONMENT", "bench")
    result = measure(args.calls)
    text = report(result, args.calls)
    print(text)
    if args.write_docs:
        intro = (
            "What promptrail's LangChain handler adds to a call, next to Langfuse's "
            "(`python benchmarks/langchain_handler.py --write-docs`; Langfuse from a separate "
            "venv, see the script)."
        )
        write_block(SECTION, intro, f"{BEGIN}\n\n{text}\n\n{END}", BEGIN, END)


if __name__ == "__main__":
    main()
