"""Counters of what capture did with each record: shipped, waiting, or dropped and why."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class CaptureStats:
    """Thread-safe counters; :func:`promptrail.stats` returns a snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()

    def add(self, name: str, amount: int = 1) -> None:
        """Count ``amount`` more of ``name`` (captured, exported, retried…)."""
        with self._lock:
            self._counts[name] += amount

    def drop(self, reason: str, amount: int = 1) -> None:
        """Count records lost, by reason (queue_full, rejected, unauthorized…)."""
        with self._lock:
            self._dropped[reason] += amount

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        """Return the counters as a plain dict."""
        with self._lock:
            data: dict[str, Any] = dict(self._counts)
            data["dropped"] = dict(self._dropped)
            data["dropped_total"] = sum(self._dropped.values())
        data.update(extra)
        return data

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._counts.clear()
            self._dropped.clear()
