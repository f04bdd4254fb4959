"""With the collector down the SDK speaks up: once when it goes, once when it is back, and at
exit where the records went and why; an exit with a collector known down is quick (issue 30.9).

"Down" is real: a port nothing listens on (connection refused), a collector answering 503
because its store refuses inserts, and a socket that accepts connections but never answers.
Exits are real interpreter exits (atexit). A 429 is not an outage: tests/sdk/test_shipping.py
(the rate-limited collector) checks that it logs no line.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

import promptrail
from promptrail import _runtime
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import free_port, serve
from tests.keys import DEFAULT_KEY
from tests.sdk.outage_steps import DURATION
from tests.stalls import live_collector, record


@promptrail.observe(name="work")
def work(n: int) -> int:
    return n


# These tests pin the memory-only mode (``PROMPTRAIL_DISK_CACHE=0``, tests/sdk/conftest.py): what
# waits for the collector stays in the process. With the disk spool (the default): test_outage.py.
pytestmark = pytest.mark.usefixtures("memory_only")


@pytest.fixture
def capture() -> Iterator[None]:
    _runtime.reset_stats()
    yield
    promptrail.shutdown()


def lines(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    """The promptrail log lines that contain ``fragment``."""
    messages = (r.getMessage() for r in caplog.records if r.name == "promptrail")
    return [m for m in messages if fragment in m]


def only_line(found: list[str], pattern: str) -> None:
    """Exactly one line was found, and it reads ``pattern`` (a regular expression)."""
    assert len(found) == 1, found
    assert re.fullmatch(pattern, found[0]), found


def dropped_while_refused(count: int, url: str) -> str:
    """The exit line's pattern for ``count`` records and a collector refusing connections."""
    return (
        rf"promptrail: {count} records dropped at shutdown: collector at {re.escape(url)} "
        r"unreachable \(connection refused\) for [\d.]+ s"
    )


class PatientTransport(httpx.HTTPTransport):
    """Real HTTP whose every request may wait 60 s for its answer, whatever the export's
    deadline: a loaded machine's collector can take longer than a short deadline to answer a
    post (that ran out in a loaded ``make test``), while the deadline still decides the retries.
    """

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions["timeout"] = httpx.Timeout(60.0).as_dict()
        return super().handle_request(request)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll ``condition`` until it holds (a generous bound only against a hang)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


def test_an_outage_is_one_warning_with_url_and_reason_and_its_end_one_line(
    settings: Settings, capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # An export's deadline (0.4 s) is shorter than the first retry's pause (0.5-1 s): each
    # export below is one failed post, then deferred. Refused connections fail at once; a post
    # that reaches the collector later waits for its answer (PatientTransport).
    promptrail.init(
        api_key=DEFAULT_KEY,
        base_url=url,
        flush_interval=0.05,
        export_timeout=0.4,
        transport=PatientTransport(),
    )
    for i in range(5):
        work(i)
        assert promptrail.flush(timeout=0.3) is False
    # Each flush's own attempt may still be under way on a loaded machine: wait for them.
    wait_for(lambda: promptrail.stats()["export_retries_deferred"] >= 5, "5 deferred exports")
    # many failed posts...

    down = lines(caplog, "unreachable")  # ...one line
    assert down == [
        f"promptrail: collector at {url} unreachable (connection refused); records wait in "
        "memory and are retried (counted in promptrail.stats())"
    ]
    assert [r.levelname for r in caplog.records if "unreachable" in r.getMessage()] == ["WARNING"]

    with serve(create_app(settings), port=port):
        assert promptrail.flush(timeout=20)
        work(5)
        assert promptrail.flush(timeout=20)

    only_line(
        lines(caplog, "reachable again"),
        rf"promptrail: collector at {re.escape(url)} reachable again after {DURATION}; "
        "5 records sent",
    )
    assert len(lines(caplog, "unreachable")) == 1  # no line while it is up
    assert promptrail.stats()["exported"] == 6


def test_a_collector_whose_store_fails_is_down_for_that_reason_until_it_is_back(
    settings: Settings, capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    # A real 503: the collector's store refuses inserts (TOO_MANY_PARTS), so it answers
    # STORE_UNAVAILABLE with Retry-After (tests/stalls.py).
    with live_collector(settings, store_retry_after_seconds=1) as live:
        assert live.post(record("req_seed")).status_code == 201  # the table holds a part
        live.stall("fail")
        promptrail.init(api_key=DEFAULT_KEY, base_url=live.url, export_timeout=0.5)
        work(1)
        work(2)
        assert promptrail.flush(timeout=0.5) is False

        only_line(
            lines(caplog, "unreachable"),
            f"promptrail: collector at {re.escape(live.url)} unreachable "
            r"\(HTTP 503 STORE_UNAVAILABLE\); records wait in memory and are retried "
            r"\(counted in promptrail.stats\(\)\)",
        )

        live.resume()
        live.wait_ready()
        assert promptrail.flush(timeout=20)

    only_line(
        lines(caplog, "reachable again"),
        rf"promptrail: collector at {re.escape(live.url)} reachable again after {DURATION}; "
        "2 records sent",
    )
    assert len(lines(caplog, "unreachable")) == 1
    assert promptrail.stats()["exported"] == 2


def test_the_exit_line_of_the_sdk_provider_path_says_why_too(
    capture: None, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    promptrail.init(
        api_key=DEFAULT_KEY, base_url=url, tracer_provider=TracerProvider(), flush_interval=0.05
    )
    work(1)
    work(2)
    assert promptrail.flush(timeout=0.5) is False

    promptrail.shutdown()

    assert len(lines(caplog, "unreachable (connection refused);")) == 1
    only_line(lines(caplog, "at shutdown"), dropped_while_refused(2, url))
    assert promptrail.stats()["dropped"] == {"shutdown_unsent": 2}


def run_app(url: str, init: str, then: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run an application that captures 3 calls and ends; return it and its exit's seconds.

    The exit is timed from the application's last line to the interpreter's end: that is
    promptrail's atexit shutdown (and the interpreter's own teardown).
    """
    script = (
        "import time, promptrail\n"
        f"promptrail.init(api_key='k', base_url={url!r}, {init})\n"
        "work = promptrail.observe(name='work')(lambda: 1)\n"
        "for _ in range(3): work()\n"
        f"{then}\n"
        "print(time.time(), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    exit_seconds = time.time() - float(done.stdout.split()[-1])
    return done, exit_seconds


def test_at_exit_the_line_says_the_records_were_dropped_where_they_were_going_and_why() -> None:
    url = f"http://127.0.0.1:{free_port()}"

    done, _ = run_app(url, "flush_interval=0.05", "promptrail.flush(timeout=0.5)")

    assert done.returncode == 0, done.stderr
    stderr = done.stderr.splitlines()
    assert (
        stderr.count(
            f"promptrail: collector at {url} unreachable (connection refused); records wait in "
            "memory and are retried (counted in promptrail.stats())"
        )
        == 1
    )
    only_line([line for line in stderr if "at shutdown" in line], dropped_while_refused(3, url))


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A collector that accepts connections and never answers (hung, or behind a dead proxy)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # the kernel completes the handshakes; nobody ever reads
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_exit_with_a_collector_known_down_is_one_quick_attempt(silent_url: str) -> None:
    # The application's own flush found the collector silent (its export deadline ran out).
    done, exit_seconds = run_app(
        silent_url, "export_timeout=0.5, flush_interval=0.05", "promptrail.flush(timeout=1.5)"
    )

    assert done.returncode == 0, done.stderr
    assert f"{silent_url} unreachable (no answer within 0.5 s)" in done.stderr
    assert "promptrail: 3 records dropped at shutdown:" in done.stderr
    # One attempt of at most 1 s, not the 3 s bound (before: 6.5 s, the worker's join and
    # the closer's join each waited their full bound behind a post stuck for 10 s).
    assert exit_seconds < 2.5, (exit_seconds, done.stderr)


def test_an_exit_while_a_post_hangs_keeps_within_the_shutdown_bound(silent_url: str) -> None:
    # Nothing has failed yet: a post is waiting (up to 10 s) when the application ends.
    done, exit_seconds = run_app(silent_url, "flush_interval=0.05", "time.sleep(0.5)")

    assert done.returncode == 0, done.stderr
    assert (
        f"promptrail: 3 records dropped at shutdown: collector at {silent_url} did not take "
        "them within the shutdown's 3.0 s"
    ) in done.stderr.splitlines()
    # 3 s in all (before: 3 s for the shipper's thread, then 3.5 s more for the last send).
    assert exit_seconds < 5.0, (exit_seconds, done.stderr)
