"""Steps the outage and spool tests share: the traced function they capture, the records stored and
the calls they count, the outage app started as a process of its own and waited on until its
records are on disk.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

import promptrail
from tests.keys import DEFAULT_KEY

ROOT = Path(__file__).resolve().parents[2]


@promptrail.observe(name="work")
def work(tag: str, n: int) -> int:
    return n


def stored(url: str) -> list[dict[str, Any]]:
    """Every record the collector holds for the default project (all pages)."""
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    with httpx.Client(base_url=url, headers={"X-API-Key": DEFAULT_KEY}, timeout=30) as client:
        while True:
            # Every kind: observed functions are spans, not model calls (docs/api-notes.md, "Traces,
            # sessions and users").
            params: dict[str, Any] = {"limit": 100, "kind": "all"}
            if cursor:
                params["cursor"] = cursor
            page = client.get("/v1/requests", params=params).json()
            found.extend(page["data"])
            cursor = page["pagination"].get("next_cursor")
            if not cursor:
                return found


def calls(records: list[dict[str, Any]]) -> Counter[tuple[str, int]]:
    """How often each captured call (tag, n) is in ``records``."""
    return Counter((r["input_variables"]["tag"], r["input_variables"]["n"]) for r in records)


def start_app(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sdk.outage_app", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_spooled(app: subprocess.Popen[str]) -> None:
    assert app.stdout is not None
    line = app.stdout.readline()
    assert line.strip() == "spooled", app.communicate(timeout=10)


# How the end-of-outage line gives the outage's length: "0.4 s", "12 s", or "under 0.1 s" when
# the collector was back before a tenth of a second (a flush while it is known down returns at
# once, so a test's outage can be that short on a fast machine).
DURATION = r"(?:under 0\.1|\d+(?:\.\d)?) s"
