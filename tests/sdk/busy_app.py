"""An application whose thread keeps the GIL, releasing it only briefly (run as a script).

Each call is an observed function doing ~0.3 ms of Python and reading a few random bytes
(``os.urandom``, which releases the GIL for a moment, as a model call over a fast transport
does for its request id). Prints, as JSON, promptrail's counters at the moment the loop ends,
before any flush: what the shipper did while the application ran.

    python tests/sdk/busy_app.py BASE_URL SECONDS FLUSH_INTERVAL
"""

from __future__ import annotations

import json
import os
import sys
import time

import promptrail
from promptrail import _runtime


@promptrail.observe()
def call(n: int) -> int:
    total = 0
    for i in range(2_000):
        total += i * n
    os.urandom(16)
    return total


def main() -> None:
    base_url, seconds, interval = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    promptrail.init(api_key=os.environ["BUSY_APP_KEY"], base_url=base_url, flush_interval=interval)
    calls = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        call(calls)
        calls += 1
    stats = promptrail.stats()
    pipeline = _runtime._pipeline
    assert pipeline is not None and pipeline.shipper is not None
    print(
        json.dumps(
            {
                "calls": calls,
                "captured": stats["captured"],
                "exported": stats["exported"],
                "hand_overs": pipeline.shipper.hand_overs,
            }
        ),
        flush=True,
    )
    os._exit(0)  # no shutdown: a collector that never answers would hold it


if __name__ == "__main__":
    main()
