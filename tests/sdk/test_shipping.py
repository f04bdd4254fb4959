"""Shipping never hurts the application: collector down, slow or failing; bounded queues;
bounded flush and exit; masking and sampling before anything leaves the process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

import promptrail
from promptrail import _runtime
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import free_port, serve
from tests.keys import DEFAULT_KEY


@contextmanager
def collector_on(settings: Settings, port: int) -> Iterator[str]:
    with serve(create_app(settings), port=port) as url:
        yield url


def listed(base_url: str) -> list[dict[str, Any]]:
    # Every kind: the observed functions here are spans, not model calls (docs/api-notes.md,
    # "Traces, sessions and users").
    response = httpx.get(
        f"{base_url}/v1/requests",
        params={"limit": 100, "kind": "all"},
        headers={"X-API-Key": DEFAULT_KEY},
    )
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def assert_balanced(stats: dict[str, Any]) -> None:
    """Every captured record is exported, pending or dropped for a reason: none vanish."""
    assert stats["captured"] == stats["exported"] + stats["pending"] + stats["dropped_total"], stats
    assert stats["dropped_total"] == sum(stats["dropped"].values())


# These tests pin the memory-only mode (``PROMPTRAIL_DISK_CACHE=0``, tests/sdk/conftest.py): what
# waits for the collector stays in the process. With the disk spool (the default): test_outage.py.
pytestmark = pytest.mark.usefixtures("memory_only")


@pytest.fixture
def fresh_stats() -> Iterator[None]:
    _runtime.reset_stats()
    yield
    assert_balanced(promptrail.stats())
    promptrail.shutdown()
    assert_balanced(promptrail.stats())
    assert promptrail.stats()["pending"] == 0


@promptrail.observe(name="work")
def work(n: int) -> int:
    return n


def test_collector_down_then_back_records_arrive(settings: Settings, fresh_stats: None) -> None:
    port = free_port()
    promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{port}", flush_interval=0.05)

    started = time.perf_counter()
    assert [work(i) for i in range(5)] == list(range(5))
    assert time.perf_counter() - started < 1.0  # the calls never waited for the network
    assert promptrail.flush(timeout=0.5) is False
    assert promptrail.stats()["pending"] == 5

    with collector_on(settings, port) as url:
        assert promptrail.flush(timeout=10)
        stored = listed(url)

    assert sorted(r["input_variables"]["n"] for r in stored) == [0, 1, 2, 3, 4]
    assert promptrail.stats()["exported"] == 5
    assert promptrail.stats()["dropped_total"] == 0


@pytest.mark.parametrize("status", [500, 503])
def test_a_failing_collector_is_retried_until_records_arrive(
    settings: Settings, fresh_stats: None, status: int
) -> None:
    failures = {"left": 2}
    app = create_app(settings)

    async def flaky(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/requests/batch" and failures["left"]:
            failures["left"] -= 1
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"retry-after", b"0.1")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    with serve(flaky) as url:
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05)
        work(7)
        assert promptrail.flush(timeout=10)
        stored = listed(url)

    assert [r["input_variables"] for r in stored] == [{"n": 7}]
    assert failures["left"] == 0
    assert promptrail.stats()["export_retries"] >= 2


def test_a_burst_over_the_budget_counts_exactly_the_records_it_drops(
    live_url: str, fresh_stats: None, caplog: pytest.LogCaptureFixture
) -> None:
    # A budget for a few dozen waiting records; the shipper waits (long flush interval).
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=live_url, max_queue_bytes=120_000, flush_interval=60
    )

    for i in range(300):
        work(i)
    assert promptrail.flush(timeout=10)
    stored = listed(live_url)

    stats = promptrail.stats()
    assert 0 < len(stored) < 100
    assert stats["captured"] == 300
    assert stats["exported"] == len(stored)
    assert stats["dropped"] == {"queue_full": 300 - len(stored)}
    assert_balanced(stats)
    # One warning, saying how to make room.
    warnings = [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]
    assert len(warnings) == 1
    assert "max_queue_bytes" in warnings[0] and "PROMPTRAIL_MAX_QUEUE_BYTES" in warnings[0]


def test_a_burst_within_the_budget_is_never_dropped(live_url: str, fresh_stats: None) -> None:
    # The shipper waits for full batches only: most of the burst sits in the queue.
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=60)

    for i in range(5_000):
        work(i)
    during = promptrail.stats()
    assert promptrail.flush(timeout=30)

    assert during["dropped_total"] == 0
    assert_balanced(during)
    stats = promptrail.stats()
    assert (stats["exported"], stats["pending"], stats["dropped_total"]) == (5_000, 0, 0)


def test_the_counts_balance_in_every_snapshot_while_threads_capture(
    live_url: str, fresh_stats: None
) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.01)
    snapshots: list[dict[str, Any]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            snapshots.append(promptrail.stats())

    def burst() -> None:
        for i in range(500):
            work(i)

    watcher = threading.Thread(target=watch)
    watcher.start()
    workers = [threading.Thread(target=burst) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert promptrail.flush(timeout=30)
    done.set()
    watcher.join()

    assert len(snapshots) > 10
    for snapshot in snapshots:
        assert_balanced(snapshot)
    assert promptrail.stats()["exported"] == 4_000


@pytest.mark.parametrize("key", [None, "", "  "])
def test_a_missing_api_key_is_one_warning_and_records_count_as_dropped(
    live_url: str,
    fresh_stats: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    key: str | None,
) -> None:
    if key is None:
        monkeypatch.delenv("PROMPTRAIL_API_KEY", raising=False)
    else:
        monkeypatch.setenv("PROMPTRAIL_API_KEY", key)
    promptrail.init(base_url=live_url, flush_interval=0.01)

    for i in range(3):
        work(i)
    assert promptrail.flush(timeout=5)

    stats = promptrail.stats()
    assert stats["dropped"] == {"no_api_key": 3}
    assert stats.get("export_retries", 0) == 0
    assert listed(live_url) == []
    messages = [r.getMessage() for r in caplog.records if r.name == "promptrail"]
    assert len(messages) == 1
    assert "PROMPTRAIL_API_KEY" in messages[0]


def test_shutdown_ships_what_is_queued_within_its_timeout(live_url: str, fresh_stats: None) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=60)
    for i in range(2_000):
        work(i)
    assert promptrail.stats()["pending"] > 0  # a full batch wakes the shipper; not all went

    promptrail.shutdown(timeout=20)

    stats = promptrail.stats()
    assert (stats["exported"], stats["dropped_total"]) == (2_000, 0)
    assert_balanced(stats)


def test_flush_and_shutdown_are_bounded_when_the_collector_is_down(fresh_stats: None) -> None:
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}", flush_interval=0.05
    )
    work(1)

    started = time.perf_counter()
    assert promptrail.flush(timeout=1.0) is False
    promptrail.shutdown(timeout=1.0)
    elapsed = time.perf_counter() - started

    assert elapsed < 4.0
    assert promptrail.stats()["dropped"].get("shutdown_unsent", 0) == 1


def test_interpreter_exit_is_bounded_with_the_collector_down() -> None:
    script = (
        "import promptrail\n"
        f"promptrail.init(api_key='k', base_url='http://127.0.0.1:{free_port()}')\n"
        "promptrail.observe(lambda: 1)()\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    elapsed = time.perf_counter() - started

    assert done.returncode == 0, done.stderr
    assert elapsed < 10


def test_mask_runs_before_records_leave_the_process(live_url: str, fresh_stats: None) -> None:
    def mask(record: dict[str, Any]) -> dict[str, Any]:
        record["input_variables"] = {k: "***" for k in record["input_variables"]}
        return record

    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05, mask=mask)
    work(42)
    assert promptrail.flush(timeout=10)

    assert [r["input_variables"] for r in listed(live_url)] == [{"n": "***"}]


@pytest.mark.parametrize(
    ("options", "expected"), [({"sample_rate": 0.0}, 0), ({"enabled": False}, 0)]
)
def test_sampling_and_disabling_capture_nothing(
    live_url: str, fresh_stats: None, options: dict[str, Any], expected: int
) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05, **options)

    assert [work(i) for i in range(3)] == [0, 1, 2]
    promptrail.flush(timeout=5)

    assert len(listed(live_url)) == expected


def test_fork_child_captures_on_its_own(live_url: str, fresh_stats: None) -> None:
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child process
        try:
            work(100)
            ok = promptrail.flush(timeout=10)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    work(200)
    assert promptrail.flush(timeout=10)

    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(r["input_variables"]["n"] for r in listed(live_url)) == [100, 200]


def test_a_stalled_collector_never_holds_up_the_application(
    settings: Settings, fresh_stats: None
) -> None:
    app = create_app(settings)
    arrived = threading.Event()
    release = threading.Event()

    async def stalled(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/requests/batch":
            arrived.set()
            while not release.is_set():  # no batch is answered until the application is done
                await asyncio.sleep(0.01)
        await app(scope, receive, send)

    with serve(stalled) as url:
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.01)
        work(0)
        assert arrived.wait(10), "the first batch never reached the collector"
        application = threading.Thread(target=lambda: [work(i) for i in range(1, 20)])
        application.start()
        # A liveness bound, not a speed test: calls that waited on the held batch would
        # never return while it is held.
        application.join(30)
        finished_while_held = not application.is_alive()
        release.set()
        application.join()
        assert promptrail.flush(timeout=20)
        stored = listed(url)

    assert finished_while_held
    assert len(stored) == 20


def test_a_fork_child_runs_one_shipper_whatever_ran_before(fresh_stats: None) -> None:
    for _ in range(3):  # each init replaces (and closes) the previous pipeline
        promptrail.init(api_key=DEFAULT_KEY, base_url=f"http://127.0.0.1:{free_port()}")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child process
        shippers = [t for t in threading.enumerate() if t.name == "promptrail-shipper"]
        os._exit(len(shippers))
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 1


def test_a_rate_limited_collector_gets_every_record_once_after_its_retry_after(
    settings: Settings, fresh_stats: None, caplog: pytest.LogCaptureFixture
) -> None:
    # One record per window: every post after the first meets a 429 with Retry-After (a window
    # of seconds, so that a busy machine still sends the next record inside it: a flush sends
    # each right after the last one's answer; 5 s windows made the test wait 10 s).
    limited = settings.model_copy(update={"limit_records": "1 per 2 seconds"})
    with serve(create_app(limited)) as url:
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05)
        for i in range(3):
            work(i)
            assert promptrail.flush(timeout=20)
        stored = listed(url)

    assert sorted(r["input_variables"]["n"] for r in stored) == [0, 1, 2]
    stats = promptrail.stats()
    assert (stats["exported"], stats["dropped_total"], stats["pending"]) == (3, 0, 0)
    assert stats["export_retries"] >= 1
    # A 429 is the collector answering, not an outage: no "unreachable" line for it.
    assert [r.getMessage() for r in caplog.records if r.name == "promptrail"] == []
