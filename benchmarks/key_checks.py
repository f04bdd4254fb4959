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
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from _report import Machine

from promptrail.collector.services.keys import KeyCache, KeyService, hash_key
from promptrail.collector.store.database import Store

ROUNDS = 7
CACHED_CALLS = 20_000
STORE_CALLS = 1_000


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
    print(f"Machine: {Machine.current().line()}")
    print(f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {count} keys, a tenth revoked")
    print(f"cached check: {cache_us:.2f} µs per request (before revocations: {before_us:.2f} µs)")
    print(f"store check: p50 {store_ms[0]:.2f} ms, p95 {store_ms[1]:.2f} ms per request")
    print(f"the key's row alone (before): p50 {row_ms[0]:.2f} ms, p95 {row_ms[1]:.2f} ms")
    print(f"SELECT 1 on the same client: p50 {floor_ms[0]:.2f} ms, p95 {floor_ms[1]:.2f} ms")


if __name__ == "__main__":
    main()
