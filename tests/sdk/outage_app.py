"""An application for the outage tests, run as its own process (tests/sdk/test_outage.py).

``python -m tests.sdk.outage_app capture URL COUNT TAG``: capture COUNT calls (their input
``{"tag": TAG, "n": i}``) while the collector at URL is down; print ``spooled`` once all of them
are on disk, then wait: a line on stdin ends it normally, or the test kills it.

``python -m tests.sdk.outage_app replay URL SECONDS``: start with the spool left by others and
flush until it is empty (or SECONDS passed); print the capture stats as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import promptrail
from tests.keys import DEFAULT_KEY


def main(mode: str, url: str, arg: str, tag: str = "") -> None:
    """Run the application in ``mode``."""
    # Capturing, the collector is down (a refused connection fails at once); replaying, a
    # post of a whole file may take seconds on a loaded machine.
    timeout = 1.0 if mode == "capture" else 30.0
    promptrail.init(api_key=DEFAULT_KEY, base_url=url, flush_interval=0.05, export_timeout=timeout)
    if mode == "capture":
        work = promptrail.observe(name="work")(lambda tag, n: n)
        count = int(arg)
        for n in range(count):
            work(tag, n)
        while promptrail.stats()["spooled"] < count:
            time.sleep(0.02)
        print("spooled", flush=True)
        sys.stdin.readline()
        return
    deadline = time.monotonic() + float(arg)
    spool = promptrail.stats()["spool"]
    assert spool is not None
    while time.monotonic() < deadline:
        promptrail.flush(timeout=5.0)
        if not any(name.endswith(".spool") for name in _names(spool)):
            break
    print(json.dumps(promptrail.stats()), flush=True)


def _names(directory: str) -> list[str]:
    import os

    return os.listdir(directory)


if __name__ == "__main__":
    main(*sys.argv[1:])
