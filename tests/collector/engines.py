"""Scripts run in a process of their own, where they load the embedded engine first.

The engine reads its options once per process, when it loads: a test of those options needs a
process where nothing loaded it before.
"""

from __future__ import annotations

import subprocess
import sys


def run_script(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run Python ``script`` with ``args`` in a new process; return what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()
