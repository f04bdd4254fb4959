"""What the request store keeps per process beside the log: the inserts under way into a
table (a detail waits for them), the newest record's time (list pages count their windows
back from it) and, per score filter, how densely its records lay (a page sizes its first
window from it).

Apart from :mod:`.requests` because none of it is SQL: each is shared by every store of one
table in the process and only ever makes a read wait or read less, never changes its answer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from datetime import datetime

from .request_filters import RequestFilter


class InsertsUnderWay:
    """The inserts into one table running now in this process, by ticket."""

    def __init__(self) -> None:
        self._running: set[int] = set()
        self._tickets = itertools.count()
        self._changed = threading.Condition()

    def begin(self) -> int:
        """Note an insert starting; return its ticket for :meth:`end`."""
        with self._changed:
            ticket = next(self._tickets)
            self._running.add(ticket)
        return ticket

    def end(self, ticket: int) -> None:
        """Note an insert ended (stored or failed)."""
        with self._changed:
            self._running.discard(ticket)
            self._changed.notify_all()

    def running(self) -> frozenset[int]:
        """The tickets of the inserts running now."""
        with self._changed:
            return frozenset(self._running)

    def wait(self, tickets: frozenset[int], timeout: float = 30.0) -> None:
        """Wait for the inserts of ``tickets`` to end."""
        with self._changed:
            self._changed.wait_for(lambda: not tickets & self._running, timeout)


_UNDER_WAY: dict[str, InsertsUnderWay] = {}
_UNDER_WAY_LOCK = threading.Lock()


def inserts_into(table: str) -> InsertsUnderWay:
    """The inserts under way into ``table``, shared by every store of it in the process."""
    with _UNDER_WAY_LOCK:
        return _UNDER_WAY.setdefault(table, InsertsUnderWay())


# How long a read of the log's newest time is trusted before a list page reads it again: the
# records other processes store meanwhile are not noted here (a hint older than the log costs
# reading, never records: see NewestHint).
_NEWEST_TRUSTED_FOR = 10.0


class NewestHint:
    """The created_at of the newest record of one log table, as far as this process knows.

    Read from the store (at most every _NEWEST_TRUSTED_FOR seconds, when a list page needs
    it) and raised by the ingest path as it stores records. A list page counts its windows
    back from it (request_filters.windows): windows are lower bounds only, so any hint keeps
    a page exact. One older than the log makes the first window read more; one newer (records
    gone) leaves it empty, and the page then reads the log's newest time itself.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: datetime | None = None
        self._read_at: float | None = None  # time.monotonic() of the last read

    def current(self) -> tuple[datetime | None, bool]:
        """The hint and whether it is still trusted (False: read the store again)."""
        with self._lock:
            read_at = self._read_at
            trusted = read_at is not None and time.monotonic() - read_at < _NEWEST_TRUSTED_FOR
            return self._at, trusted

    def read(self, at: datetime | None) -> None:
        """Set the hint to what the store just said (None: the log is empty)."""
        with self._lock:
            self._at, self._read_at = at, time.monotonic()

    def note(self, at: datetime | None) -> None:
        """Raise the hint to ``at``, a stored record's time, once it was read at all (before
        that a record of the past would say less than the log holds)."""
        with self._lock:
            if at is not None and self._read_at is not None and (self._at is None or at > self._at):
                self._at = at


_NEWEST: dict[str, NewestHint] = {}


class DensityHints:
    """Per score filter, how densely the records passing it lay in the last page of it:
    records per second between the page's anchor and its last row (see
    ``request_filters.widened``). A hint only sizes a page's first window; any is exact."""

    _MAX = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._density: OrderedDict[Hashable, float] = OrderedDict()

    def get(self, key: Hashable) -> float | None:
        """The density last seen for ``key``, if any."""
        with self._lock:
            return self._density.get(key)

    def put(self, key: Hashable, density: float) -> None:
        """Keep what a page of ``key`` saw (the least recently set go past _MAX)."""
        with self._lock:
            self._density[key] = density
            self._density.move_to_end(key)
            while len(self._density) > self._MAX:
                self._density.popitem(last=False)


def density_key_of(project: str, filters: RequestFilter) -> Hashable:
    """What a density hint is kept by: every part of the filter but its dates."""
    return (
        project,
        filters.prompt_name,
        filters.status,
        filters.model,
        filters.trace_id,
        filters.kinds,
        filters.scores,
    )


def newest_of(table: str) -> NewestHint:
    """The newest record's time of ``table``, shared by every store of it in the process."""
    with _UNDER_WAY_LOCK:
        return _NEWEST.setdefault(table, NewestHint())
