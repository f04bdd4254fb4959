"""The embedded store's registry journal: a write is kept once it is in a file, and reaches
chDB right behind.

A registry write on the embedded store is one ``INSERT .. VALUES`` per table, and chDB writes
each insert as a new part on disk (~4-6 ms here, most of a ``PATCH``). The journal takes the
statements of a group commit, appends them to a file of its own (one ``write`` call, ~20 µs)
and answers; a thread applies them to chDB in order, several entries in one call when writes
come faster than that. Every read of the registry's tables first waits until what was
journaled before it is applied (:meth:`RegistryJournal.settle`), so a query never misses a
write its caller was told about; reads served from memory do not wait at all.

What it keeps, and how:

- An entry is framed as ``length (4 bytes) | CRC-32 (4 bytes) | statements (UTF-8)``. A
  process killed in the middle of an append leaves a torn last frame: the next open applies
  every whole entry before it and drops the torn tail (it was never acknowledged: the writer
  answers only after its append returned).
- An entry's statements carry ``insert_deduplication_token`` settings (the registry's tables
  keep a deduplication window): an entry applied, then applied again after a crash that came
  before the file was emptied, stores its rows once.
- The file is emptied whenever everything appended is applied, and applied and emptied when
  the store closes. Under a steady stream of writes it may never be all applied at once: once
  it holds ``compact_after`` entries already applied, it is rewritten with the pending ones
  only (a new file renamed over it), so a restart never replays more than that. A file left
  by a killed process is applied when the next one opens the database, before anything
  reads it.
- At most ``max_pending`` entries wait to be applied: an append past that waits for the
  applier (at most ``append_wait`` seconds, then the write fails as a store outage, 503).
  Unbounded, 8 clients had ~300 writes/s acknowledged where the applier stored ~95
  one-write entries/s (a new version or a label move of one project holds the project's
  write lock, so such writes never share a group commit), so the backlog, a read's wait for
  it (30 s before a 503) and a restart's replay grew with every second of load: a
  10,000-prompt load left 12,352 entries, replayed for 9 minutes at the next start.
- Durability is chDB's own: neither fsyncs (ClickHouse does not by default), so both survive
  the process being killed, and neither promises more when the machine loses power.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

from clickhouse_connect.driver.exceptions import OperationalError

_log = logging.getLogger(__name__)
_HEADER = struct.Struct(">II")
# Retries of a failing apply: from 50 ms, doubling, at most 2 s apart.
_FIRST_RETRY = 0.05
_LAST_RETRY = 2.0
# Entries waiting for the applier before an append waits (see the module doc). A burst of
# that many writes is taken at full speed (a 400-create burst, a 200 x 3 load); sustained,
# the writes go at the applier's pace (~100 one-write entries/s here), and a read that settles
# waits for at most that many entries (~5 s). 64 cut 400 creates from 8 clients to 33/s.
_MAX_PENDING = 512
# How long an append waits for room before its write fails as a store outage.
_APPEND_WAIT = 30.0
# Applied entries the file may hold before it is rewritten with the pending ones only: a
# restart replays at most this many again, well inside the tables' deduplication window
# (schema.DEDUP_WINDOW inserts), so each stores its rows once.
_COMPACT_AFTER = 512


class JournalClosed(RuntimeError):
    """The journal was closed: the write was not taken."""


def encode_entry(statements: str) -> bytes:
    """One entry as the file holds it: its length, its CRC-32, then the statements."""
    payload = statements.encode("utf-8")
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_entries(data: bytes) -> tuple[list[str], int]:
    """The whole entries at the start of a journal file, and how many bytes after them were
    torn or corrupt (dropped)."""
    entries: list[str] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = data[start : start + length]
        if len(payload) < length or zlib.crc32(payload) != checksum:
            break
        entries.append(payload.decode("utf-8"))
        offset = start + length
    return entries, len(data) - offset


class RegistryJournal:
    """Registry statements kept in a file, applied to the store by a thread of their own.

    ``execute`` runs statements (several joined by ``;``) on the store and raises on failure.
    """

    def __init__(
        self,
        path: Path,
        execute: Callable[[str], object],
        max_pending: int = _MAX_PENDING,
        append_wait: float = _APPEND_WAIT,
        compact_after: int = _COMPACT_AFTER,
    ) -> None:
        self._path = path
        self._execute = execute
        self._max_pending = max_pending
        self._append_wait = append_wait
        self._compact_after = compact_after
        self._in_file = 0  # entries the file holds, applied or not
        self._cond = threading.Condition()
        self._pending: list[tuple[int, str]] = []
        self._appended = 0  # entries appended (their sequence numbers run 1, 2, ...)
        self._applied = 0  # entries applied, in order
        self._closed = False
        self._failure: BaseException | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._thread = threading.Thread(target=self._run, name="registry-journal", daemon=True)
        self._thread.start()

    def _recover(self) -> None:
        """Apply what a process that stopped before applying it left in the file."""
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        entries, dropped = read_entries(data)
        if dropped:
            _log.warning(
                "registry journal %s: %d bytes after its last whole entry dropped (a write "
                "cut off by the process's end, never acknowledged)",
                self._path,
                dropped,
            )
        if entries:
            self._execute("; ".join(entries))
            _log.info("registry journal %s: %d writes applied on open", self._path, len(entries))
        self._path.write_bytes(b"")

    def append(self, statements: str) -> int:
        """Keep ``statements`` in the file; return the entry's sequence number once it is
        there (it is then applied in order, in the background)."""
        frame = encode_entry(statements)
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._closed or len(self._pending) < self._max_pending,
                self._append_wait,
            ):
                failure = self._failure
                raise OperationalError(
                    f"registry write not taken: the store applied none of the "
                    f"{len(self._pending)} writes before it within {self._append_wait:.0f} s"
                    + (f": {failure}" if failure is not None else "")
                ) from failure
            if self._closed:
                raise JournalClosed("the registry journal is closed")
            os.write(self._fd, frame)
            self._in_file += 1
            self._appended += 1
            self._pending.append((self._appended, statements))
            self._cond.notify_all()
            return self._appended

    def settle(self, timeout: float = 30.0) -> None:
        """Return once every entry appended before the call is applied (at once when all
        are); raise an ``OperationalError`` (a store outage) naming the store's error if they
        could not be applied within ``timeout``."""
        with self._cond:
            target = self._appended
            if self._applied >= target:
                return
            if not self._cond.wait_for(lambda: self._applied >= target, timeout):
                failure = self._failure
                # The store's own kind of outage: an API read answers 503 STORE_UNAVAILABLE.
                raise OperationalError(
                    f"registry writes not applied to the store within {timeout:.0f} s"
                    + (f": {failure}" if failure is not None else "")
                ) from failure

    def close(self, timeout: float = 30.0) -> None:
        """Apply what is pending, stop the thread, empty and close the file. What could not be
        applied within ``timeout`` stays in the file for the next open."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            applied_all = not self._pending
            if applied_all:
                os.ftruncate(self._fd, 0)
        os.close(self._fd)

    def _compact(self) -> None:
        """Rewrite the file with the pending entries only (holding the lock, so no append
        comes between): a process killed at any point leaves the old file or the new one,
        and either holds every pending entry."""
        fresh = self._path.with_name(self._path.name + ".compact")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"".join(encode_entry(statements) for _, statements in self._pending))
        finally:
            os.close(fd)
        os.replace(fresh, self._path)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND, 0o600)
        self._in_file = len(self._pending)

    def _run(self) -> None:
        delay = _FIRST_RETRY
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return  # closed, nothing left
                batch = list(self._pending)
            try:
                self._execute("; ".join(statements for _, statements in batch))
            except Exception as exc:
                with self._cond:
                    first = self._failure is None
                    self._failure = exc
                    closing = self._closed
                if first:
                    _log.warning(
                        "registry journal: writes not applied to the store yet, retrying "
                        "(they are kept in %s)",
                        self._path,
                        exc_info=True,
                    )
                if closing and delay >= _LAST_RETRY:
                    return  # left in the file for the next open
                threading.Event().wait(delay)
                delay = min(delay * 2, _LAST_RETRY)
                continue
            delay = _FIRST_RETRY
            with self._cond:
                if self._failure is not None:
                    _log.info("registry journal: the store took the waiting writes again")
                    self._failure = None
                self._applied = batch[-1][0]
                del self._pending[: len(batch)]
                if not self._pending:
                    # Nothing left to apply: the file starts again empty (appends hold the
                    # same lock, so none is lost between the two).
                    os.ftruncate(self._fd, 0)
                    self._in_file = 0
                elif self._in_file - len(self._pending) >= self._compact_after:
                    self._compact()
                self._cond.notify_all()
