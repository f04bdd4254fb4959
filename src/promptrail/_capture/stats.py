"""Counters of what capture did with each record: shipped, waiting, or dropped and why.

Every record capture takes is, at any moment, in exactly one place: queued (a span waiting for
the shipper), in flight (taken by the shipper, not yet handed to the exporter), pending (a
record waiting for the collector), exported, spooled (written to disk for a later
replay: docs/sdk.md, "Outages"), or dropped for a reason. The parts that move
records from one place to the next do it under :attr:`CaptureStats.lock`, and a snapshot is
taken under it too, so ``captured == exported + pending + spooled + dropped_total`` holds in every
snapshot, not only once the pipeline is idle.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class CaptureStats:
    """Thread-safe counters; :func:`promptrail.stats` returns a snapshot."""

    def __init__(self) -> None:
        # Re-entrant: a part that moves records holds it around its own move and the counts.
        self.lock = threading.RLock()
        self._counts: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        # Records the disk spool gave up on (its bounds, corrupt blocks): apart from
        # ``dropped``, as the spool also holds other processes' records (docs/sdk.md, "Outages").
        self._spool_dropped: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        """Count ``amount`` more of ``name`` (captured, exported, retried, in_flight…)."""
        with self.lock:
            self._counts[name] += amount

    def drop(self, reason: str, amount: int = 1) -> None:
        """Count records lost, by reason (queue_full, rejected, no_api_key…)."""
        with self.lock:
            self._dropped[reason] += amount

    def spool_drop(self, reason: str, amount: int = 1) -> None:
        """Count records lost from the disk spool, by reason (spool_full, spool_corrupt…)."""
        with self.lock:
            self._spool_dropped[reason] += amount

    def count(self, name: str) -> int:
        """The current value of counter ``name``."""
        with self.lock:
            return self._counts[name]

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        """Return the counters as a plain dict."""
        with self.lock:
            data: dict[str, Any] = dict(self._counts)
            data["dropped"] = dict(self._dropped)
            data["dropped_total"] = sum(self._dropped.values())
            data["spool_dropped"] = dict(self._spool_dropped)
        data.update(extra)
        return data

    def reset(self) -> None:
        """Zero every counter (between runs, with nothing in flight)."""
        with self.lock:
            self._counts.clear()
            self._dropped.clear()
            self._spool_dropped.clear()
