"""Capture fixtures: promptrail initialised against a live collector, and its records.

A pytest plugin of tests/conftest.py, so the SDK's tests (tests/sdk) and the integrations'
(tests/integrations) share one meaning of ``capture`` and ``records``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import promptrail
from promptrail import _runtime
from tests.keys import DEFAULT_KEY


@pytest.fixture
def capture(live_url: str) -> Iterator[str]:
    """promptrail initialised against the live collector, every provider patched."""
    _runtime.reset_stats()
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)
    promptrail.instrument()
    yield live_url
    promptrail.uninstrument()
    promptrail.shutdown()


Records = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def records(capture: str) -> Records:
    """Flush, then return the collector's records (details), newest first."""

    def fetch(expected: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
        return fetch_records(capture, expected, timeout)

    return fetch


def fetch_records(base_url: str, expected: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
    """Flush, then the collector's records of every kind (details), newest first, once
    ``expected`` arrived."""
    deadline = time.monotonic() + timeout
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {DEFAULT_KEY}"}
    ) as client:
        while True:
            # The whole wait's bound, not 5 s: on a loaded machine a flush to the live
            # collector took longer than 5 s now and then (the records' arrival is the test).
            assert promptrail.flush(timeout=max(5.0, deadline - time.monotonic()))
            # Every kind: the log lists model calls only unless asked (docs/api-notes.md, "Traces,
            # sessions and users").
            listed = client.get("/v1/requests", params={"limit": 100, "kind": "all"}).json()["data"]
            if len(listed) >= expected or time.monotonic() > deadline:
                return [client.get(f"/v1/requests/{r['id']}").json()["data"] for r in listed]
            time.sleep(0.05)
