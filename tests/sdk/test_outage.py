"""An outage of the collector costs nothing (issue 34): real processes, killed with SIGKILL
mid-outage, a real collector coming back at the same address, real spool files.

The disk spool is on by default; every test here keeps it in a directory of its own
(tests/sdk/conftest.py). The memory-only mode (``PROMPTRAIL_DISK_CACHE=0``) has its own tests:
tests/sdk/test_shipping.py and tests/sdk/test_collector_down.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import promptrail
from promptrail import _runtime
from promptrail._disk import scope_of
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import free_port, serve
from tests.keys import DEFAULT_KEY
from tests.sdk.outage_steps import DURATION, ROOT, calls, start_app, stored, wait_spooled, work


@pytest.fixture
def capture() -> Iterator[None]:
    _runtime.reset_stats()
    yield
    promptrail.shutdown()


def replay_app(url: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.sdk.outage_app", "replay", url, "60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    stats: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return stats


def spool_dir(url: str) -> Path:
    return (
        Path(os.environ["PROMPTRAIL_CACHE_DIR"]) / "spool" / scope_of(url, DEFAULT_KEY) / "records"
    )


def spool_files(url: str) -> list[Path]:
    return sorted(spool_dir(url).glob("*.spool"))


def test_an_app_killed_mid_outage_delivers_every_record_once_when_started_again(
    settings: Settings,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = start_app("capture", url, "5000", "solo")
    wait_spooled(app)
    app.send_signal(signal.SIGKILL)
    app.communicate(timeout=10)
    assert app.returncode == -signal.SIGKILL
    files = spool_files(url)
    made = [spool_dir(url), spool_dir(url).parent, spool_dir(url).parent.parent]  # to spool/
    assert files and {oct(d.stat().st_mode & 0o777) for d in made} == {"0o700"}
    assert all(oct(f.stat().st_mode & 0o777) == "0o600" for f in files)
    # A kill between a replayed post and the file's delete: that file is sent twice.
    twin = files[0].with_name(f"{'9' * 20}-1-000000-{files[0].name.rsplit('-', 1)[1]}")
    shutil.copy(files[0], twin)

    with serve(create_app(settings), port=port):
        stats = replay_app(url)
        records = stored(url)

    assert stats["replayed"] >= 5000 and stats["spool_dropped"] == {}
    assert calls(records) == Counter({("solo", n): 1 for n in range(5000)})
    assert spool_files(url) == []


def test_four_workers_sharing_a_spool_two_of_them_killed_lose_nothing(
    settings: Settings,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    workers = [start_app("capture", url, "1250", f"w{i}") for i in range(4)]
    for worker in workers:
        wait_spooled(worker)
    for worker in workers[:2]:
        worker.send_signal(signal.SIGKILL)
    for worker in workers[2:]:
        worker.communicate("\n", timeout=30)  # a normal exit: atexit with the collector down
        assert worker.returncode == 0
    for worker in workers[:2]:
        worker.communicate(timeout=10)
    assert {f.name.split("-")[1] for f in spool_files(url)} == {str(w.pid) for w in workers}

    with serve(create_app(settings), port=port):
        replay_app(url)
        records = stored(url)

    assert calls(records) == Counter({(f"w{i}", n): 1 for i in range(4) for n in range(1250)})


def test_an_outage_says_where_records_wait_and_its_end_how_many_came_from_the_spool(
    settings: Settings, capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # A refused connection fails at once; a longer timeout only spares a loaded machine.
    promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05, export_timeout=10)
    for n in range(3):
        work("line", n)
    assert promptrail.flush(timeout=1.0) is False
    stats = promptrail.stats()
    assert (stats["spooled"], stats["pending"], stats["dropped_total"]) == (3, 0, 0)
    assert stats["captured"] == stats["exported"] + stats["pending"] + stats["spooled"]
    down = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert down == [
        f"promptrail: collector at {url} unreachable (connection refused); records are kept "
        f"on disk at {stats['spool']} and sent when it is back (counted in promptrail.stats())"
    ]

    with serve(create_app(settings), port=port):
        assert promptrail.flush(timeout=20)  # the shipper's next round may replay them first
        work("line", 3)
        assert promptrail.flush(timeout=20)
        got = calls(stored(url))

    assert got == Counter({("line", n): 1 for n in range(4)})
    back = [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(back) == 1, back
    assert re.fullmatch(
        rf"promptrail: collector at {re.escape(url)} reachable again after {DURATION}; "
        r"3 records sent \(3 from the spool\)",
        back[0],
    )
    assert promptrail.stats()["replayed"] == 3


def test_at_exit_records_still_waiting_are_kept_on_disk_and_the_line_says_where() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    script = (
        "import promptrail\n"
        f"promptrail.init(api_key={DEFAULT_KEY!r}, base_url={url!r}, flush_interval=60)\n"
        "work = promptrail.observe(name='work')(lambda: 1)\n"
        "for _ in range(3): work()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "at shutdown" in line]
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(
        rf"promptrail: 3 records kept on disk at {re.escape(str(spool_dir(url)))} at "
        rf"shutdown: collector at {re.escape(url)} unreachable \(connection refused\) for "
        r"(under 0\.1|[\d.]+) s",
        lines[0],
    )
    assert len(spool_files(url)) == 1


def test_scores_captured_while_the_collector_is_down_ride_the_spool_and_arrive_once(
    settings: Settings, capture: None
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05, export_timeout=10)
    for n in range(5):
        promptrail.score("n", n, request_id=f"req_spooled_{n}")
    assert promptrail.flush(timeout=1.0) is False
    counts = promptrail.stats()["scores"]
    assert (counts["spooled"], counts["pending"], counts["dropped_total"]) == (5, 0, 0)
    promptrail.shutdown()
    scores_dir = spool_dir(url).with_name("scores")
    assert len(list(scores_dir.glob("*.spool"))) == 1
    shutil.copy(next(scores_dir.glob("*.spool")), scores_dir / f"{'9' * 20}-1-000000-5.spool")

    _runtime.reset_stats()
    with serve(create_app(settings), port=port):
        promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05)
        assert promptrail.flush(timeout=20)
        # The scores' shipper replays the spool in its own rounds: wait until both files were
        # posted and answered 201. The collector stores a batch of scores before it answers
        # (no buffer behind it), so one read then sees every copy it stored.
        deadline = time.monotonic() + 20
        while promptrail.stats()["scores"]["replayed"] < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert promptrail.stats()["scores"]["replayed"] == 10
        with httpx.Client(base_url=url, headers={"X-API-Key": DEFAULT_KEY}) as client:
            listed = client.get("/v1/scores", params={"limit": 100}).json()["data"]
        values = sorted((s["request_id"], s["value"]) for s in listed)

    # The twin file was sent too: each score is stored once.
    assert values == [(f"req_spooled_{n}", n) for n in range(5)], promptrail.stats()["scores"]
    assert promptrail.stats()["scores"]["replayed"] == 10
    assert list(scores_dir.glob("*.spool")) == []
