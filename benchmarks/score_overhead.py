"""What ``promptrail.score()`` costs the caller's thread (issue 31: at most 5 µs p50).

    .venv/bin/python benchmarks/score_overhead.py [--calls 50000]

Each call is timed alone (perf_counter_ns around it) in three cases: a collector stand-in in
the process that takes every batch (an httpx MockTransport answering 201), the collector
unreachable (the shipper's thread retries beside the caller), and inside an observed function
with no target given (the current trace is looked up). Prints p50, p90 and p99 in µs, and
whether every score was accounted for (captured == exported + pending + dropped).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import httpx

import promptrail
from promptrail import _runtime


def _accept_all(request: httpx.Request) -> httpx.Response:
    return httpx.Response(201, json={"data": {"accepted": 0, "rejected": []}})


def _timed(calls: int, body: Callable[[], None]) -> list[int]:
    from time import perf_counter_ns

    samples = []
    for _ in range(calls):
        started = perf_counter_ns()
        body()
        samples.append(perf_counter_ns() - started)
    samples.sort()
    return samples


def _case(name: str, calls: int, transport: httpx.BaseTransport | None, observed: bool) -> dict:
    _runtime.reset_stats()
    base_url = "http://collector.invalid" if transport else "http://127.0.0.1:9"
    promptrail.init(api_key="pr-bench", base_url=base_url, transport=transport)

    def by_request() -> None:
        promptrail.score("helpful", 0.8, request_id="req_bench")

    if observed:

        @promptrail.observe(name="bench")
        def run() -> list[int]:
            return _timed(calls, lambda: promptrail.score("helpful", True))

        samples = run()
    else:
        samples = _timed(calls, by_request)
    promptrail.flush(timeout=5)
    counts = promptrail.stats()["scores"]
    promptrail.shutdown(0.5)

    def pct(share: float) -> float:
        return round(samples[min(len(samples) - 1, int(len(samples) * share))] / 1000, 2)

    balanced = (
        counts["captured"] == counts["exported"] + counts["pending"] + counts["dropped_total"]
    )
    return {
        "case": name,
        "p50_us": pct(0.5),
        "p90_us": pct(0.9),
        "p99_us": pct(0.99),
        "accounted": balanced,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    calls = parser.parse_args().calls
    results = [
        _case("collector taking every batch", calls, httpx.MockTransport(_accept_all), False),
        _case("collector unreachable", calls, None, False),
        _case("inside @observe, no target", calls, httpx.MockTransport(_accept_all), True),
    ]
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
