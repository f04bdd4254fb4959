"""``promptrail stub-provider`` as a demo runs it: a long life, a port that may be taken."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from promptrail.testing import KEPT_CALLS, OpenAIStub

CLI = Path(sys.executable).parent / "promptrail"


def test_the_call_log_keeps_the_newest_calls_only() -> None:
    stub = OpenAIStub()
    for number in range(2 * KEPT_CALLS + 1):
        stub.record("/v1/chat/completions", {}, {"n": number})

    assert len(stub.calls) <= 2 * KEPT_CALLS
    assert stub.calls[-1].body == {"n": 2 * KEPT_CALLS}
    assert stub.calls[0].body["n"] > 0


def test_a_taken_port_is_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [str(CLI), "stub-provider", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert refused.returncode == 1
    assert "export" not in refused.stdout
    assert refused.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: address already in use; stop what uses it "
        "or pass --port"
    ]
