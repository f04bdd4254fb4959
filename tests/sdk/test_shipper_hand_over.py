"""An application thread that keeps the GIL does not starve the shipper (issue 52, point 3).

CPython 3.11 restarts a waiting thread's switch interval each time the holder releases the
GIL: a thread that holds it and lets go only briefly every few milliseconds (a loop of model
calls over a fast transport, any CPU-bound work) kept the shipper from ever running, so
nothing was shipped while it ran and the queue grew toward its memory budget. Once a round is
overdue the application's thread now hands the shipper the GIL, waiting (bounded) on a lock
for the round to end (src/promptrail/_capture/shipping.py, ``Shipper._hand_over``).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.keys import DEFAULT_KEY

APP = Path(__file__).with_name("busy_app.py")


def _run_app(base_url: str, seconds: float, interval: float, cache: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROMPTRAIL_")}
    env.update(BUSY_APP_KEY=DEFAULT_KEY, PROMPTRAIL_CACHE_DIR=str(cache))
    done = subprocess.run(
        [sys.executable, str(APP), base_url, str(seconds), str(interval)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_records_are_shipped_while_the_application_keeps_the_gil(
    live_url: str, tmp_path: Path
) -> None:
    # The collector answers from this process; the application is a process of its own.
    seen = _run_app(live_url, seconds=3.0, interval=0.2, cache=tmp_path)
    assert seen["calls"] > 1_000
    # Shipped while the loop ran, not at exit: at most the last rounds' worth still queued.
    assert seen["exported"] >= 0.8 * seen["captured"], seen
    assert seen["hand_overs"] >= 5, seen


@pytest.fixture
def silent_collector() -> Iterator[str]:
    """A port that takes connections and never answers (a collector hung mid-request)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_collector_that_never_answers_holds_the_application_rarely(
    silent_collector: str, tmp_path: Path
) -> None:
    seen = _run_app(silent_collector, seconds=3.0, interval=0.1, cache=tmp_path)
    assert seen["exported"] == 0
    # Each hand-over that found the round unfinished doubles the wait before the next one
    # (0.1, 0.2, 0.4, 0.8, 1.6 s, or 512, 1,024, 2,048... more items): some 6 in the run,
    # where one each full batch would be dozens (~25,000 calls here).
    assert 1 <= seen["hand_overs"] <= 10, seen
