"""What a provider connection adds to each call, in process, on a fresh embedded store.

    .venv/bin/python benchmarks/connections.py

A project with 5 connections, the one used with a monthly budget (issue 49: the budget check
adds at most 1 ms p50 per call, the month's spend not summed again per call). Timed per call,
on the event loop, as a run makes them:

- routing a model by the credential order (the project's connections in memory);
- admitting the call: the base URL's host checked (an address literal, as a self-hosted
  server's usually is) and the budget compared with the month's count (in memory);
- counting the call's cost and use afterwards;
- beside them, what summing the month's spend from the log costs (done once, then every
  60 s per connection), over ``--records`` records of the connection this month.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime

from _report import Machine

from promptrail.collector.app import open_services
from promptrail.collector.config import Settings
from promptrail.collector.models.connections import ConnectionIn

CALLS = 20_000


async def per_call_us(project: str, services: object) -> tuple[float, float, float]:
    """Median per-call microseconds of routing, admitting and counting, over CALLS calls."""
    credentials = services.runs._credentials  # type: ignore[attr-defined]
    route_t, admit_t, charge_t = [], [], []
    now = datetime.now(UTC)
    for _ in range(CALLS):
        began = time.perf_counter()
        route = await credentials.aroute(project, "budgeted/llama-3-8b")
        routed = time.perf_counter()
        await credentials.admit(project, route.connection)
        admitted = time.perf_counter()
        credentials.charge(project, route.connection.name, 0.0, now)
        charged = time.perf_counter()
        route_t.append(routed - began)
        admit_t.append(admitted - routed)
        charge_t.append(charged - admitted)
    return tuple(statistics.median(t) * 1e6 for t in (route_t, admit_t, charge_t))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=100_000)
    records = parser.parse_args().records
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=data_dir, database="bench")
        services, _ = open_services(settings)
        try:
            for n in range(4):
                services.connections.create(
                    "p",
                    ConnectionIn(
                        name=f"other-{n}",
                        provider="openai_compatible",
                        api_key=f"sk-other-{n}-000000",
                        base_url="http://127.0.0.1:9/v1",
                        models=[f"m{n}"],
                    ),
                )
            services.connections.create(
                "p",
                ConnectionIn(
                    name="budgeted",
                    provider="openai_compatible",
                    api_key="sk-budgeted-00000000",
                    base_url="http://10.0.0.5:8000/v1",
                    models=["llama-3-8b"],
                    monthly_budget_usd=1_000_000,
                ),
            )
            db = "`bench`.requests"
            services.store.client.command(
                f"INSERT INTO {db} (project, id, created_at, model, provider, status, "
                "metadata, metadata_map, estimated_cost_usd, cost_known) SELECT 'p', "
                "concat('r', toString(number)), now64(3), 'llama-3-8b', 'openai', 'success', "
                "'{\"connection\": \"budgeted\"}', map('connection', 'budgeted'), 0.001, 1 "
                f"FROM numbers({records})"
            )
            sums = []
            for _ in range(20):
                began = time.perf_counter()
                services.connections.spend.forget("p", "budgeted")
                services.connections.spend.spent("p", "budgeted")
                sums.append((time.perf_counter() - began) * 1e3)
            route_us, admit_us, charge_us = asyncio.run(per_call_us("p", services))
        finally:
            services.close()
    print(f"Machine: {Machine.current().line()}")
    print(f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; 5 connections, {records} records")
    print(f"route by the credential order: p50 {route_us:.1f} µs per call")
    print(f"admit (link-local check + budget): p50 {admit_us:.1f} µs per call")
    print(f"count the cost and use: p50 {charge_us:.1f} µs per call")
    print(
        f"sum the month's spend from the log: p50 {statistics.median(sums):.2f} ms (once a minute)"
    )


if __name__ == "__main__":
    main()
