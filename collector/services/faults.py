"""Stall the store's writes on purpose (``/admin/store/...``, fault injection only).

A test or benchmark outside the collector asks it to make its own log refuse or delay inserts
through ClickHouse's real mechanisms (:mod:`..store.faults`); this is the service the admin
route calls, so that no route reaches the store itself.
"""

from __future__ import annotations

from ..store.database import Store
from ..store.faults import StallMode, resume_writes, stall_writes

__all__ = ["FaultService", "StallMode"]


class FaultService:
    """Stall and resume the request log's writes of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def stall(self, mode: StallMode, seconds: float) -> None:
        """Make the log's inserts fail (TOO_MANY_PARTS) or wait ``seconds``, or detach it."""
        stall_writes(self._store.client, self._store.database, mode, seconds)

    def resume(self) -> None:
        """Give the log's inserts ClickHouse's default limits back, and reattach it."""
        resume_writes(self._store.client, self._store.database)
