"""Limits per project: the request rate of every API route, the volume of the ingest routes.

Limits are written in the notation of the ``limits`` package (``"20/second;600/minute"``: at
most 20 in any second and 600 in any minute) and counted in this process's memory
(docs/security.md, "Limits per project"). Three kinds:

- ``requests``: API requests of a project, counted on a sliding window (the ``limits``
  package's sliding window counter) when the request comes in (a refused request is not
  counted);
- ``records`` and ``bytes``: what the ingest routes (``/v1/requests``, ``/v1/requests/batch``,
  ``/v1/traces``) took, counted on a fixed window once a request is done. A request is let in
  while the project has any of its window left, so a batch is never cut in half, and never
  refused forever for being larger than a whole window; the window's last batch may go over by
  up to its own size.

A project is known only once its key is checked, so an unauthenticated request never touches
the counters, and each project counts apart from the others.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Literal

from limits import RateLimitItem
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter, SlidingWindowCounterRateLimiter

from ..errors import RateLimited
from ..models.rate_limit_settings import ProjectLimitOverride, parse_limit

Kind = Literal["requests", "records", "bytes"]
_VOLUME: tuple[Kind, ...] = ("records", "bytes")


class ProjectLimits:
    """Count each project's requests and ingest volume; raise ``RateLimited`` over a limit."""

    def __init__(
        self,
        requests: str = "",
        records: str = "",
        bytes_: str = "",
        overrides: Mapping[str, ProjectLimitOverride] | None = None,
    ) -> None:
        self._defaults: dict[Kind, list[RateLimitItem]] = {
            "requests": parse_limit(requests),
            "records": parse_limit(records),
            "bytes": parse_limit(bytes_),
        }
        self._overrides = {
            project: _own_limits(override) for project, override in (overrides or {}).items()
        }
        storage = MemoryStorage()
        # Both keep two counters at most per project and limit, whatever the amounts (a moving
        # window keeps an entry per unit counted: a day's requests, or every byte). The sliding
        # one spares requests the fixed window's double burst across a window's edge.
        self._sliding = SlidingWindowCounterRateLimiter(storage)
        self._fixed = FixedWindowRateLimiter(storage)
        # Several limits of one kind are tested, then counted, as one step.
        self._lock = threading.Lock()

    def admit_request(self, project: str) -> None:
        """Count one request of ``project``, or refuse it (uncounted) when a limit is reached."""
        items = self._items(project, "requests")
        if not items:
            return
        with self._lock:
            for item in items:
                if not self._sliding.test(item, "requests", project):
                    reset = self._sliding.get_window_stats(item, "requests", project).reset_time
                    raise _refusal(project, "requests", item, reset)
            for item in items:
                self._sliding.hit(item, "requests", project)

    def admit_ingest(self, project: str) -> None:
        """Refuse an ingest request of ``project`` when a volume window of it is used up."""
        for kind in _VOLUME:
            for item in self._items(project, kind):
                if not self._fixed.test(item, kind, project):
                    reset = self._fixed.get_window_stats(item, kind, project).reset_time
                    raise _refusal(project, kind, item, reset)

    def charge_ingest(self, project: str, records: int, nbytes: int) -> None:
        """Count what an admitted ingest request took: its stored records and its body's bytes."""
        costs: tuple[tuple[Kind, int], ...] = (("records", records), ("bytes", nbytes))
        with self._lock:
            for kind, cost in costs:
                if cost > 0:
                    for item in self._items(project, kind):
                        self._fixed.hit(item, kind, project, cost=cost)

    def _items(self, project: str, kind: Kind) -> list[RateLimitItem]:
        own = self._overrides.get(project)
        if own is not None and kind in own:
            return own[kind]
        return self._defaults[kind]


def _own_limits(override: ProjectLimitOverride) -> dict[Kind, list[RateLimitItem]]:
    given: tuple[tuple[Kind, str | None], ...] = (
        ("requests", override.requests),
        ("records", override.records),
        ("bytes", override.bytes),
    )
    return {kind: parse_limit(value) for kind, value in given if value is not None}


def _refusal(project: str, kind: Kind, item: RateLimitItem, reset: float) -> RateLimited:
    # Retry-After is whole seconds; rounding up never sends a client back too early.
    retry_after = max(1, math.ceil(reset - time.time()))
    return RateLimited(project, kind, _describe(item), retry_after)


def _describe(item: RateLimitItem) -> str:
    unit = item.GRANULARITY.name
    if item.multiples == 1:
        return f"{item.amount} per {unit}"
    return f"{item.amount} per {item.multiples} {unit}s"
