"""What limits per project cost a request, in process: the limiter's calls with limits off and on.

    .venv/bin/python benchmarks/rate_limits.py

Each round sends the calls one API request makes to the limiter (``admit_request``) and the
calls one ingest request adds (``admit_ingest``, then ``charge_ingest`` of 100 records), for
requests spread over 1 project and over 1,000; the limits are high enough never to refuse, so
every call does its whole work. Time is the process's CPU time (the in-memory storage's expiry
thread included), steadier than wall time on a shared machine; the best round of each is kept.
"""

from __future__ import annotations

import time

from promptrail.collector.services.rate_limits import ProjectLimits

ROUNDS = 9
CALLS = 20_000
ON = {"requests": "1000000/second;100000000/minute", "records": "1000000000/minute"}


def per_call_us(limits: ProjectLimits, projects: list[str], ingest: bool) -> float:
    began = time.process_time()
    for i in range(CALLS):
        project = projects[i % len(projects)]
        limits.admit_request(project)
        if ingest:
            limits.admit_ingest(project)
            limits.charge_ingest(project, 100, 60_000)
    return (time.process_time() - began) / CALLS * 1e6


def main() -> None:
    print(f"{CALLS} requests per round, best of {ROUNDS} rounds, CPU µs per request")
    for projects in ([f"p{i}" for i in range(1)], [f"p{i}" for i in range(1000)]):
        for ingest in (False, True):
            off = ProjectLimits()
            on = ProjectLimits(ON["requests"], ON["records"], "100000000000/minute")
            best_off = min(per_call_us(off, projects, ingest) for _ in range(ROUNDS))
            best_on = min(per_call_us(on, projects, ingest) for _ in range(ROUNDS))
            kind = "ingest request" if ingest else "API request"
            print(
                f"{len(projects):>5} projects, {kind:<14}: off {best_off:6.2f}  on {best_on:6.2f}"
            )


if __name__ == "__main__":
    main()
