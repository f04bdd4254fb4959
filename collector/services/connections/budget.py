"""A connection's spend this calendar month (UTC), and its monthly budget.

The spend is the cost of the records made through the connection (``metadata.connection``),
priced by the request log's own table (each record's ``estimated_cost_usd``). Summing the log
on every call would cost a query per call, so each connection's month-to-date spend is summed
once, then counted up in memory by the cost of each call this collector makes through it, and
summed again every :data:`RESUM_SECONDS` (calls made by other collectors sharing the store) and
when the month turns. Between two sums a collector does not see the others' calls, and a call
is counted when it ends: the budget can be passed by the calls in flight when it is reached
and, with several collectors, by what the others spent in the last :data:`RESUM_SECONDS`
(docs/api-notes.md, Connections).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio

from ...errors import BudgetExceeded
from ...store.connections import ConnectionStore

RESUM_SECONDS = 60.0


def month_start(now: datetime | None = None) -> datetime:
    """Return the first instant of the calendar month (UTC) of ``now``."""
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass
class _Spend:
    month: datetime
    total: float
    summed_at: float


class SpendBook:
    """Month-to-date spend per (project, connection): summed, then counted up."""

    def __init__(
        self,
        store: ConnectionStore,
        settle: Callable[[str], None] | None = None,
        resum_seconds: float = RESUM_SECONDS,
    ) -> None:
        """``settle(project)`` waits for the project's records still being written behind
        (``PendingWrites.wait``), so that a sum counts every call this collector made."""
        self._store = store
        self._settle = settle
        self._resum = resum_seconds
        self._spend: dict[tuple[str, str], _Spend] = {}
        self._lock = threading.Lock()

    def _fresh(self, key: tuple[str, str]) -> _Spend | None:
        entry = self._spend.get(key)
        if entry is None or entry.month != month_start():
            return None
        if time.monotonic() - entry.summed_at > self._resum:
            return None
        return entry

    def spent(self, project: str, name: str) -> float:
        """Return the month's spend of a connection (sums the log when the count is stale)."""
        key = (project, name)
        entry = self._fresh(key)
        if entry is not None:
            return entry.total
        month = month_start()
        if self._settle is not None:
            self._settle(project)
        summed = self._store.spend(project, name, month)
        with self._lock:
            entry = self._spend.get(key)
            # Never below what this collector counted: a record written behind may not be in
            # the log yet when it is summed.
            counted = entry.total if entry is not None and entry.month == month else 0.0
            self._spend[key] = _Spend(month, max(summed, counted), time.monotonic())
            return self._spend[key].total

    async def aspent(self, project: str, name: str) -> float:
        """:meth:`spent`, summing the log (when it must) on a worker thread."""
        entry = self._fresh((project, name))
        if entry is not None:
            return entry.total
        return await anyio.to_thread.run_sync(self.spent, project, name)

    def charge(self, project: str, name: str, cost: float, at: datetime) -> None:
        """Count the cost of a call made through the connection at ``at``."""
        if cost <= 0:
            return
        with self._lock:
            entry = self._spend.get((project, name))
            if entry is not None and entry.month == month_start(at):
                entry.total += cost

    def forget(self, project: str, name: str) -> None:
        """Drop a connection's count (it was deleted)."""
        with self._lock:
            self._spend.pop((project, name), None)

    async def admit(self, project: str, name: str, budget: float | None) -> None:
        """Refuse (402 BUDGET_EXCEEDED) a call through a connection at or over its budget."""
        if budget is None:
            return
        spent = await self.aspent(project, name)
        if spent >= budget:
            raise BudgetExceeded(
                f"Connection '{name}' has spent ${spent:.4f} of its ${budget:.2f} monthly budget",
                {"connection": name, "budget_usd": budget, "spent_usd": round(spent, 10)},
            )
