"""What checking a request's API key costs, in process, on a fresh embedded store.

    .venv/bin/python benchmarks/key_checks.py [--keys 1000]

A store with ``--keys`` keys over 10 projects, a tenth of them revoked. Three ways to check a
key, each timed per call:

- the cache the collector keeps on the embedded store (``KeyService.known_project``): a hash, a
  dict lookup, the revocation time compared with the clock;
- the cache it kept before revocations existed (a hash and a dict lookup), for comparison;
- the store, as a collector on a ClickHouse server checks every request
  (``KeyService.authenticate`` without a cache): one point query of the key and its
  revocations (its scopes and expiry never change: read at its first check only); here on
  chDB, beside what the store lookup read before revocations existed (the key's row alone)
  and a ``SELECT 1``, the engine's floor.

The cache paths keep the best of several rounds (a shared machine only ever adds time); the
store paths report percentiles of single calls.

Then a signed-in session's request against a key's (issue 51: a request with a scoped key or a
session cookie costs at most 50 µs p50 more than the key check before scopes), in a collector
app on an embedded store: the access check itself (``api/access.py``'s ``enforce`` on the
route of ``GET /v1/prompts/{name}``, a key's cache entry against the session's), and the whole
``GET /v1/prompts/greet`` over the ASGI transport, the two callers in turn, p50 of each.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _report import Machine
from fastapi.routing import iter_route_contexts
from starlette.requests import Request

from promptrail.collector.access.principal import SESSION_COOKIE
from promptrail.collector.api.access import enforce
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.keys import KeyCache, KeyService, hash_key
from promptrail.collector.store.database import Store

ROUNDS = 7
CACHED_CALLS = 20_000
STORE_CALLS = 1_000
CHECK_CALLS = 20_000
HTTP_CALLS = 2_000
BENCH_KEY = "pr-bench-key-checks"
PASSWORD = "a long enough password"


def per_call_us(check: Callable[[str], object], keys: list[str], calls: int) -> float:
    """The best round's mean time of ``check`` per call, in microseconds."""
    best = float("inf")
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for i in range(calls):
            check(keys[i % len(keys)])
        best = min(best, (time.perf_counter() - began) / calls * 1e6)
    return best


def percentiles_ms(check: Callable[[str], object], keys: list[str]) -> tuple[float, float]:
    """p50 and p95 of single calls of ``check``, in milliseconds."""
    times = []
    for i in range(STORE_CALLS):
        began = time.perf_counter()
        check(keys[i % len(keys)])
        times.append((time.perf_counter() - began) * 1e3)
    cuts = statistics.quantiles(times, n=20)
    return statistics.median(times), cuts[18]


def old_cache(keys: KeyService, live: list[str]) -> Callable[[str], object]:
    """The check before revocations: a hash and a lookup under a lock, nothing else."""
    known = {hashlib.sha256(k.encode()).hexdigest(): keys.authenticate(k) for k in live}
    lock = threading.Lock()

    def check(raw: str) -> object:
        digest = hashlib.sha256(raw.encode()).hexdigest()
        with lock:
            return known.get(digest)

    return check


async def p50_pair_us(
    first: Callable[[], Awaitable[object]], second: Callable[[], Awaitable[object]], calls: int
) -> tuple[float, float]:
    """p50 of ``calls`` single calls of each, in turn (a shared machine's load falls on both
    alike), in microseconds."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(calls):
        for call, kept in ((first, times[0]), (second, times[1])):
            began = time.perf_counter()
            await call()
            kept.append((time.perf_counter() - began) * 1e6)
    return statistics.median(times[0]), statistics.median(times[1])


def sessions_against_keys(data_dir: str) -> dict[str, tuple[float, float]]:
    """(key, session) p50s in µs: the access check alone, and a prompt read over ASGI."""
    settings = Settings(
        clickhouse_url=f"chdb://{Path(data_dir) / 'app'}",
        data_dir=Path(data_dir),
        init_api_key=BENCH_KEY,
    )
    app = create_app(settings)
    key_auth = {"Authorization": f"Bearer {BENCH_KEY}"}

    async def run() -> dict[str, tuple[float, float]]:
        async with app.router.lifespan_context(app):
            accounts = app.state.services.accounts
            accounts.create_user("bench@example.com", PASSWORD, instance_admin=True)
            token = accounts.sessions.sign_in("bench@example.com", PASSWORD).token
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
                made = await http.post(
                    "/v1/prompts",
                    json={"name": "greet", "template": "Hi {{n}}", "model": "gpt-4o"},
                    headers=key_auth,
                )
                assert made.status_code == 201, made.text
                cookie = {"Cookie": f"{SESSION_COOKIE}={token}"}
                for headers in (key_auth, cookie):  # both callers resolved once, as in use
                    assert (await http.get("/v1/prompts/greet", headers=headers)).is_success

                route = next(
                    c.original_route
                    for c in iter_route_contexts(app.routes)
                    if c.path == "/v1/prompts/{name}" and "GET" in (c.methods or ())
                )

                def request(headers: list[tuple[bytes, bytes]]) -> Request:
                    scope: dict[str, Any] = {
                        "type": "http",
                        "method": "GET",
                        "path": "/v1/prompts/greet",
                        "headers": headers,
                        "app": app,
                        "route": route,
                        "path_params": {"name": "greet"},
                        "query_string": b"",
                    }
                    return Request(scope)

                key_raw = [(b"authorization", f"Bearer {BENCH_KEY}".encode())]
                cookie_raw = [(b"cookie", f"{SESSION_COOKIE}={token}".encode())]
                check = await p50_pair_us(
                    lambda: enforce(request(key_raw)),
                    lambda: enforce(request(cookie_raw)),
                    CHECK_CALLS,
                )
                read = await p50_pair_us(
                    lambda: http.get("/v1/prompts/greet", headers=key_auth),
                    lambda: http.get("/v1/prompts/greet", headers=cookie),
                    HTTP_CALLS,
                )
                return {"check": check, "read": read}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keys", type=int, default=1000)
    count = parser.parse_args().keys
    with tempfile.TemporaryDirectory() as data_dir:
        store = Store.open(f"chdb://{data_dir}/clickhouse", "bench")
        try:
            cached = KeyService(store.keys, KeyCache())
            uncached = KeyService(store.keys)
            made = [cached.create(f"project-{i % 10}") for i in range(count)]
            for key in made[::10]:
                cached.revoke(key)
            live = [key for i, key in enumerate(made) if i % 10]
            for key in live:  # warm the cache, as requests do
                cached.authenticate(key)
            assert all(cached.known_project(key) for key in live)

            cache_us = per_call_us(cached.known_project, live, CACHED_CALLS)
            before_us = per_call_us(old_cache(cached, live), live, CACHED_CALLS)
            for key in live:  # a collector reads each key's scopes once, at its first check
                uncached.authenticate(key)
            store_ms = percentiles_ms(uncached.authenticate, live)
            one_table = "SELECT project FROM `bench`.api_keys WHERE key_hash = {h:String} LIMIT 1"
            row_ms = percentiles_ms(
                lambda raw: store.client.query(one_table, parameters={"h": hash_key(raw)}), live
            )
            floor_ms = percentiles_ms(lambda _: store.client.query("SELECT 1"), live)
        finally:
            store.close()
        callers = sessions_against_keys(data_dir)
    print(f"Machine: {Machine.current().line()}")
    print(f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {count} keys, a tenth revoked")
    print(f"cached check: {cache_us:.2f} µs per request (before revocations: {before_us:.2f} µs)")
    print(f"store check: p50 {store_ms[0]:.2f} ms, p95 {store_ms[1]:.2f} ms per request")
    print(f"the key's row alone (before): p50 {row_ms[0]:.2f} ms, p95 {row_ms[1]:.2f} ms")
    print(f"SELECT 1 on the same client: p50 {floor_ms[0]:.2f} ms, p95 {floor_ms[1]:.2f} ms")
    for name, what in (
        ("check", f"the access check alone (enforce), {CHECK_CALLS} each"),
        ("read", f"GET /v1/prompts/greet over ASGI, {HTTP_CALLS} each"),
    ):
        key_us, session_us = callers[name]
        print(
            f"{what}: key p50 {key_us:.1f} µs, session cookie p50 {session_us:.1f} µs "
            f"({session_us - key_us:+.1f} µs)"
        )


if __name__ == "__main__":
    main()
