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
from ..store.rollups import SPANS, BucketState, RollupStore, Span

logger = logging.getLogger("promptrail.rollup")

# Buckets summed per statement: a day of hours, or a week of days, keeps a sealing query's
# memory small (one group per prompt, version, model and status of each bucket).
_PER_SEAL: dict[Span, int] = {"hour": 24, "day": 7}
# Buckets looked at per round of the sealer.
_DUE_PER_ROUND = 2000
# Beyond this many ranges a query reads its whole period from the log instead (each range is
# one more clause for ClickHouse to analyse against the primary key).
_MAX_RANGES = 64
_MILLISECOND = timedelta(milliseconds=1)
_HOUR = SPANS["hour"][0]
_DAY = SPANS["day"][0]


class RollupService:
    """Seals hours and days in the background; plans analytics queries onto them."""

    def __init__(self, store: RollupStore, settle: timedelta, interval: float) -> None:
        self._store = store
        self._settle = settle
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def plan(
        self,
        project: str,
        start: datetime,
        end: datetime,
        days: bool = True,
        hours: bool = True,
    ) -> Plan:
        """Split the period ``[start, end]`` (both inclusive) into sealed and raw ranges.

        ``days``: whether whole days may be read as days (not when grouping by hour);
        ``hours``: whether hours may be read as hours (not when grouping by metadata).
        Neither: the whole period is read from the log.
        """
        if not days and not hours:
            return Plan(raw=[(start, end + _MILLISECOND)])
        first = start.replace(minute=0, second=0, microsecond=0)
        last = end.replace(minute=0, second=0, microsecond=0)
        states = self._store.states(project, first, last)
        day_states = states["day"] if days else []
        return plan_period(
            states["hour"], day_states, start, end + _MILLISECOND, self._settle, hours
        )

    def seal_due(self) -> int:
        """Seal every hour and day due now; return how many were sealed."""
        sealed = 0
        began = time.monotonic()
        for span in ("hour", "day"):
            while not self._stop.is_set():
                due = self._store.due(span, self._settle, _DUE_PER_ROUND)
                for project, pairs in groupby(due, key=lambda pair: pair[0]):
                    buckets = [bucket for _, bucket in pairs]
                    step = _PER_SEAL[span]
                    for i in range(0, len(buckets), step):
                        if self._stop.is_set():  # closing: the rest waits for the next start
                            return sealed
                        self._store.seal(project, span, buckets[i : i + step])
                        sealed += len(buckets[i : i + step])
                if len(due) < _DUE_PER_ROUND:
                    break
        if sealed:
            logger.info("rollup: sealed %d bucket(s) in %.1f s", sealed, time.monotonic() - began)
        return sealed

    def start(self) -> None:
        """Seal in the background every ``interval`` seconds."""
        self._thread = threading.Thread(target=self._loop, name="rollup-sealer", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop sealing (an unfinished bucket is sealed again by the next start)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        caught_up = False
        while not self._stop.wait(self._interval):
            try:
                self.seal_due()
            except Exception:
                # The store may be closing, or busy: analytics stay exact without the
                # rollup, and the next round retries.
                logger.exception("rollup: sealing failed")
                continue
            if not caught_up and not self._stop.is_set():
                # Said once: until then, analytics of a store that was down (or loaded
                # behind the collector's back) read more of the log than they will.
                caught_up = True
                logger.info("rollup: caught up: every settled hour and day is sealed")


def plan_period(
    hours: list[BucketState],
    days: list[BucketState],
    start: datetime,
    end: datetime,
    settle: timedelta,
    use_hours: bool = True,
) -> Plan:
    """Plan ``[start, end)`` from its touched hours and days (untouched ones hold no records).

    A bucket is read sealed when it lies wholly inside the period and its newest seal began
    more than ``settle`` after its last touch; a day so sealed covers its hours. What is left
    of each touched hour inside the period is read from the log.
    """
    plan = Plan()
    whole_days = set()
    for day in days:
        if _settled(day, settle) and day.bucket >= start and day.bucket + _DAY <= end:
            whole_days.add(day.bucket)
            _extend(plan.days, day.bucket, day.bucket + _DAY)
    for hour in hours:
        low, high = hour.bucket, hour.bucket + _HOUR
        if low.replace(hour=0) in whole_days:
            continue
        if use_hours and _settled(hour, settle) and low >= start and high <= end:
            _extend(plan.hours, low, high)
        else:
            _extend(plan.raw, max(low, start), min(high, end))
    if len(plan.days) + len(plan.hours) + len(plan.raw) > _MAX_RANGES:
        return Plan(raw=[(start, end)])
    return plan


def _settled(state: BucketState, settle: timedelta) -> bool:
    return state.sealed_at is not None and state.sealed_at > state.touched_at + settle


def _extend(ranges: list[tuple[datetime, datetime]], low: datetime, high: datetime) -> None:
    if low >= high:
        return
    if ranges and ranges[-1][1] == low:
        ranges[-1] = (ranges[-1][0], high)
    else:
        ranges.append((low, high))
