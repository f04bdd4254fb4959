"""The one entry point for a batched table group's rows: insert, and get the outcome.

:class:`RowWriter` takes rows already encoded in the table's insert format and answers
:class:`.Stored` once they are, or :class:`.Refused`; how they get there is the group's
declared mode (:mod:`.plan`): a group commit in this process (the embedded store) or the
server's asynchronous insert. On the embedded store the group commit keeps the rows in the
log's journal (:mod:`.log_journal`, ``GroupCommitLimits.journal``): they are answered once
appended there, stored right behind in large inserts, and every read of the log waits for
them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..connection import error_summary, is_store_outage
from . import log_journal
from .group_commit import BufferClosed, BufferFull, InsertBuffer, WritesFailing
from .log_journal import LogJournal
from .outcomes import STORED, Refused, WriteOutcome
from .plan import TableGroup, WriteMode

# How long a caller waits for its group commit before taking its rows back (then once more,
# when their insert had already begun: its outcome decides).
ACK_TIMEOUT = 60.0
_ASYNC_INSERT = {"async_insert": 1, "wait_for_async_insert": 1}


class RowTable(Protocol):
    """What a :class:`RowWriter` inserts into (:class:`..requests.RequestStore`)."""

    def insert(self, batches: Sequence[bytes], settings: dict[str, Any] | None = None) -> None:
        """Insert encoded batches of rows in one block."""

    def probe_insert(self) -> None:
        """Insert no rows (the store's checks still run), to tell when writes work again."""

    def journal_path(self) -> Path | None:
        """Where the table's journal lives (the embedded store), or None (a server)."""

    def applier(self) -> tuple[RowTable, Callable[[], None]]:
        """The table on a client of its own, and what closes that client."""


@dataclass(frozen=True)
class GroupCommitLimits:
    """The group commit's bounds (docs/deploy.md, "When the store stalls").

    ``pending_bytes`` of rows at most wait for the store; a caller waits up to
    ``wait_seconds`` for room; a failing store is probed every ``probe_seconds``. ``journal``:
    on a store that has one (embedded), rows are answered once in the log's journal
    (:mod:`.log_journal`) instead of once inserted (``PROMPTRAIL_REQUEST_JOURNAL``).
    """

    pending_bytes: int = 128 << 20
    wait_seconds: float = 5.0
    probe_seconds: float = 1.0
    journal: bool = False


class RowWriter:
    """Encoded rows of one table group in, :class:`.Stored` or :class:`.Refused` out.

    ``what`` names the rows in refusals' messages ("records not stored: ...").
    """

    def __init__(
        self,
        table: RowTable,
        mode: WriteMode,
        limits: GroupCommitLimits | None = None,
        what: str = "records",
        ack_timeout: float = ACK_TIMEOUT,
    ) -> None:
        if mode not in (WriteMode.GROUP_COMMIT, WriteMode.ASYNC_INSERT):
            raise ValueError(f"a row writer does not write by {mode.value}")
        self._table = table
        self._what = what
        self._ack_timeout = ack_timeout
        limits = limits or GroupCommitLimits()
        grouped = mode is WriteMode.GROUP_COMMIT
        path = table.journal_path() if grouped and limits.journal else None
        self._journal_path = path
        self._journal: LogJournal | None = None
        self._buffer: InsertBuffer | None = None
        if path is not None:
            self._journal = log_journal.acquire(path, lambda: _open_journal(table, path, limits))
        elif grouped:
            self._buffer = InsertBuffer(
                table.insert,
                max_pending_bytes=limits.pending_bytes,
                wait=limits.wait_seconds,
                probe=table.probe_insert,
                probe_interval=limits.probe_seconds,
            )

    @classmethod
    def for_group(
        cls,
        group: TableGroup,
        table: RowTable,
        embedded: bool,
        limits: GroupCommitLimits | None = None,
    ) -> RowWriter:
        """The writer of ``group`` as it declares itself on this kind of store."""
        return cls(table, group.mode(embedded), limits)

    @property
    def held_bytes(self) -> int:
        """Bytes of rows waiting for the store in this process (0 without a group commit)."""
        if self._journal is not None:
            return self._journal.held_bytes
        return self._buffer.held_bytes if self._buffer is not None else 0

    @property
    def journaled(self) -> bool:
        """Whether rows are answered once in the log's journal (not once inserted)."""
        return self._journal is not None

    def settle(self) -> None:
        """Return once every row answered so far is in the store's tables (at once without a
        journal: rows are answered once stored); see :meth:`.LogJournal.settle`."""
        if self._journal is not None:
            self._journal.settle()

    def probe(self) -> None:
        """Try the store now with an insert of no rows: a journaled writer refuses rows at
        once if it fails, as after a failed insert of its own."""
        if self._journal is not None:
            self._journal.probe()

    def refusal(self) -> Refused | None:
        """Why rows would be refused right now, or None while the writer takes them."""
        source = self._journal if self._journal is not None else self._buffer
        state = source.refusal() if source is not None else None
        if state is None:
            return None
        return Refused(busy=state.full, message=state.message, details=state.details)

    def insert(self, rows: bytes, count: int) -> WriteOutcome:
        """Store ``count`` rows encoded as one insert body; answer once they are stored.

        Refused, none of them was stored, but for the rare insert still under way when the
        wait ended (said in the message: a retry with the same ids is collapsed by the
        table). A failure that is no store outage (a bug) on the server's path is raised.
        """
        if not count:
            return STORED
        not_stored = f"{self._what} not stored"
        if self._journal is not None:
            return self._journal_append(rows, not_stored)
        if self._buffer is None:
            return self._insert_async(rows)
        started = time.monotonic()
        try:
            waiter = self._buffer.submit(rows)
        except BufferFull as exc:
            return Refused(busy=True, message=f"{not_stored}: {exc}")
        except (WritesFailing, BufferClosed) as exc:
            return Refused(busy=False, message=f"{not_stored}: {exc}")
        try:
            waiter.result(timeout=self._ack_timeout)
            return STORED
        except TimeoutError:
            if self._buffer.withdraw(waiter):
                took = f"the store took none for {self._ack_timeout:.0f}s"
                return Refused(busy=True, message=f"{not_stored}: {took}")
        except Exception as exc:
            return Refused(busy=False, message=f"{not_stored}: {error_summary(exc)}")
        # Their insert is under way: its outcome decides (ClickHouse bounds its own delays).
        try:
            waiter.result(timeout=self._ack_timeout)
            return STORED
        except Exception as exc:
            waited = time.monotonic() - started
            return Refused(
                busy=False,
                message=f"{self._what} not confirmed stored after {waited:.1f}s (retry with "
                f"the same ids and created_at: a copy stored meanwhile is collapsed): "
                f"{error_summary(exc)}",
            )

    def _journal_append(self, rows: bytes, not_stored: str) -> WriteOutcome:
        """Kept once appended to the journal: stored right behind, read by every read after."""
        assert self._journal is not None
        try:
            self._journal.submit(rows)
        except BufferFull as exc:
            return Refused(busy=True, message=f"{not_stored}: {exc}")
        except (WritesFailing, BufferClosed) as exc:
            return Refused(busy=False, message=f"{not_stored}: {exc}")
        except OSError as exc:
            return Refused(busy=False, message=f"{not_stored}: the journal took no append: {exc}")
        return STORED

    def _insert_async(self, rows: bytes) -> WriteOutcome:
        """A ClickHouse server batches for us: async inserts, acknowledged once flushed."""
        try:
            self._table.insert([rows], _ASYNC_INSERT)
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            return Refused(busy=False, message=f"{self._what} not stored: {error_summary(exc)}")
        return STORED

    def close(self) -> None:
        """Store what is waiting and stop the group commit's thread (a journal shared with
        another writer of the same log stays open for it)."""
        if self._buffer is not None:
            self._buffer.close()
        if self._journal_path is not None and self._journal is not None:
            self._journal = None
            log_journal.release(self._journal_path)


def _open_journal(
    table: RowTable, path: Path, limits: GroupCommitLimits
) -> tuple[LogJournal, Callable[[], None]]:
    """The log's journal at ``path``, inserting through a client of its own (a stalled insert
    then holds neither reads nor the collector's other writes)."""
    applier, close = table.applier()
    try:
        journal = LogJournal(
            path,
            applier.insert,
            applier.probe_insert,
            max_pending_bytes=limits.pending_bytes,
            wait=limits.wait_seconds,
            retry_interval=limits.probe_seconds,
        )
    except BaseException:
        close()
        raise
    return journal, close
