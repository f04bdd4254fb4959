"""Whether the store takes a request-log writer's inserts, and why it refuses new rows.

Both writers of the request log, the group commit's buffer (:mod:`.group_commit`) and the
request-log journal (:mod:`.log_journal`), hold at most ``max_pending`` bytes of records for
the store and refuse new ones while it does not take them (docs/deploy.md, "When the store
stalls"): after a failed insert, until one succeeds (503 ``STORE_UNAVAILABLE``), and once a
caller waited its whole wait for room, until the next insert finishes (503 ``STORE_BUSY``).
They keep that state the same way, each under its own condition: this class is that state.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ..connection import error_summary

logger = logging.getLogger("promptrail.ingest")


@dataclass(frozen=True)
class BufferState:
    """Why a writer refuses rows right now (see :meth:`RefusingWriter.refusal`)."""

    full: bool
    message: str
    details: dict[str, object]


class RefusingWriter:
    """The refusal state of a bounded writer: failing since when and why, full or not.

    A subclass calls :meth:`_init_refusals` in its ``__init__``, gives ``_cond`` (the
    condition its state is kept under), ``_max_pending`` and :attr:`held_bytes`, sets
    ``_full`` when a caller found no room, and calls :meth:`_insert_failed` /
    :meth:`_insert_stored` (holding ``_cond``) after each insert.
    """

    _cond: threading.Condition
    _max_pending: int

    def _init_refusals(self) -> None:
        # Since when the writer has held rows without an insert finishing (None: since ever).
        self._progress_at = time.monotonic()
        self._failing_since: datetime | None = None
        self._last_error = ""
        self._full = False  # a caller found no room since the last insert finished

    @property
    def held_bytes(self) -> int:
        """Bytes of records held for the store: waiting, and being inserted."""
        raise NotImplementedError

    def refusal(self) -> BufferState | None:
        """Why new rows would be refused now, or None when the writer takes them."""
        with self._cond:
            if self._failing_since is not None:
                return BufferState(
                    full=False,
                    message=self._failing_message(),
                    details={
                        "failing_since": self._failing_since.isoformat(),
                        "error": self._last_error,
                    },
                )
            if self._full:
                return BufferState(
                    full=True,
                    message=self._full_message(),
                    details={"buffered_bytes": self.held_bytes, "max_bytes": self._max_pending},
                )
        return None

    def _failing_message(self) -> str:
        since = self._failing_since.isoformat() if self._failing_since else "now"
        return f"store writes failing since {since}: {self._last_error}"

    def _full_message(self) -> str:
        idle = time.monotonic() - self._progress_at
        return (
            f"ingest buffer full: {self.held_bytes} bytes of records wait for the store "
            f"(at most {self._max_pending}), none stored for {idle:.1f}s"
        )

    def _insert_failed(self, exc: Exception) -> bool:
        """Note a failed insert (holding ``_cond``); True when writes worked until it."""
        first = self._failing_since is None
        if first:
            self._failing_since = datetime.now(UTC)
        self._last_error = error_summary(exc)
        self._cond.notify_all()
        return first

    def _insert_stored(self) -> None:
        """Note an insert the store took (holding ``_cond``): rows are taken again."""
        self._progress_at = time.monotonic()
        self._full = False
        if self._failing_since is not None:
            logger.warning("store writes work again (failing since %s)", self._failing_since)
        self._failing_since = None
        self._last_error = ""
        self._cond.notify_all()
