"""The analytics rollup's two jobs: seal settled hours, and plan each query onto it.

See :mod:`promptrail.collector.store.rollups` for why the sums stay exact.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from itertools import groupby

from ..store.analytics import Plan
from ..store.rollups import HOUR, HourState, RollupStore

logger = logging.getLogger("promptrail.rollup")

# Hours summed per statement: one day's worth keeps a sealing query's memory small.
_HOURS_PER_SEAL = 24
# Hours looked at per round of the sealer.
_DUE_PER_ROUND = 2000
# Beyond this many ranges a query reads its whole period from the log instead (each range is
# one more clause for ClickHouse to analyse against the primary key).
_MAX_RANGES = 64
_MILLISECOND = timedelta(milliseconds=1)


class RollupService:
    """Seals hours in the background; tells analytics which hours it may read sealed."""

    def __init__(self, store: RollupStore, settle: timedelta, interval: float) -> None:
        self._store = store
        self._settle = settle
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def plan(self, project: str, start: datetime, end: datetime) -> Plan:
        """Split the period ``[start, end]`` (both inclusive) into sealed and raw ranges."""
        first = start.replace(minute=0, second=0, microsecond=0)
        last = end.replace(minute=0, second=0, microsecond=0)
        states = self._store.hours(project, first, last)
        return plan_period(states, start, end + _MILLISECOND, self._settle)

    def seal_due(self) -> int:
        """Seal every hour due now; return how many were sealed."""
        sealed = 0
        began = time.monotonic()
        while not self._stop.is_set():
            due = self._store.due(self._settle, _DUE_PER_ROUND)
            for project, pairs in groupby(due, key=lambda pair: pair[0]):
                hours = [hour for _, hour in pairs]
                for i in range(0, len(hours), _HOURS_PER_SEAL):
                    chunk = hours[i : i + _HOURS_PER_SEAL]
                    self._store.seal(project, chunk)
                    sealed += len(chunk)
            if len(due) < _DUE_PER_ROUND:
                break
        if sealed:
            logger.info("rollup: sealed %d hour(s) in %.1f s", sealed, time.monotonic() - began)
        return sealed

    def start(self) -> None:
        """Seal in the background every ``interval`` seconds."""
        self._thread = threading.Thread(target=self._loop, name="rollup-sealer", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop sealing (an unfinished hour is sealed again by the next start)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.seal_due()
            except Exception:
                # The store may be closing, or busy: analytics stay exact without the
                # rollup, and the next round retries.
                logger.exception("rollup: sealing failed")


def plan_period(states: list[HourState], start: datetime, end: datetime, settle: timedelta) -> Plan:
    """Plan ``[start, end)`` from its touched hours (hours never touched hold no records).

    An hour is read sealed when it lies wholly inside the period and its newest seal began
    more than ``settle`` after its last touch; the rest of each touched hour inside the
    period is read from the log.
    """
    sealed: list[tuple[datetime, datetime]] = []
    raw: list[tuple[datetime, datetime]] = []
    for state in states:
        low, high = state.hour, state.hour + HOUR
        settled = state.sealed_at is not None and state.sealed_at > state.touched_at + settle
        if settled and low >= start and high <= end:
            _extend(sealed, low, high)
        else:
            _extend(raw, max(low, start), min(high, end))
    if len(sealed) + len(raw) > _MAX_RANGES:
        return Plan(sealed=[], raw=[(start, end)])
    return Plan(sealed=sealed, raw=raw)


def _extend(ranges: list[tuple[datetime, datetime]], low: datetime, high: datetime) -> None:
    if low >= high:
        return
    if ranges and ranges[-1][1] == low:
        ranges[-1] = (ranges[-1][0], high)
    else:
        ranges.append((low, high))
