"""The embedded store's registry journal: a write is kept once it is in a file, and reaches
chDB right behind.

A registry write on the embedded store is one ``INSERT .. VALUES`` per table, and chDB writes
each insert as a new part on disk (~4-6 ms here, most of a ``PATCH``). The journal takes the
rows of a group commit, appends them to a file of its own (one ``write`` call, ~20 µs) and
answers; a thread applies them to chDB in order. Every read of the registry's tables first
waits until what was journaled before it is applied (:meth:`RegistryJournal.settle`), so a
query never misses a write its caller was told about; reads served from memory do not wait.

**The applier is the group commit of the project's writes.** A new version or a label move
of one project holds a lock of its prompt or of the project while it decides and journals, so
such writes reach the journal one entry each (~20 µs apart). The applier takes every entry
waiting when it is free and stores them as one ``INSERT .. VALUES`` per table, whatever their
count (:meth:`RegistryJournal.append_rows`): the cost of a chDB call is per part, not per
row, so under load the applier stores as many writes a second as arrive (it stored ~95
one-write entries a second when each entry was an insert of its own). Entries of plain
statements (:meth:`RegistryJournal.append`, the audit chain's) are applied as they are.

What it keeps, and how:

- An entry is framed as ``length (4 bytes) | CRC-32 (4 bytes) | payload (UTF-8)``. A
  process killed in the middle of an append leaves a torn last frame: the next open applies
  every whole entry before it and drops the torn tail (it was never acknowledged: the writer
  answers only after its append returned).
- Applied twice, a write is stored once. A plain entry's statements carry
  ``insert_deduplication_token`` settings of their own. Rows entries are merged by the
  applier, so before it runs a batch it appends a frame naming the batch (an id, and how many
  of the oldest unbatched rows entries it takes), and the batch's inserts carry tokens made of
  that id; once applied, a frame saying so. A process killed with a batch named and not
  marked applied leaves both in the file, and the next open applies exactly that batch again
  under the same tokens (the tables' deduplication window keeps each row once); a batch
  marked applied is skipped, and rows entries no batch named are applied as a new batch, named
  in the file first. A failed apply is retried with the same batch, never a regrouping.
- The file is emptied whenever everything appended is applied, and applied and emptied when
  the store closes. Under a steady stream of writes it may never be all applied at once: once
  it holds ``compact_after`` entries already applied, it is rewritten with the pending ones
  only (a new file renamed over it, between two batches), so a restart never replays more
  than that. A file left by a killed process is applied when the next one opens the
  database, before anything reads it.
- **The backlog is bounded**: at most ``max_pending`` entries wait to be applied (taken by
  the applier or not). An append past that waits for the applier (at most ``append_wait``
  seconds, then the write fails as a store outage, 503, and is not taken). Since the applier
  takes every waiting entry at once, the bound is only reached when the store stalls or is
  much slower than usual; a read's wait for the backlog is one or two applies, and a
  restart replays at most ``max_pending + compact_after`` entries.
- Durability is chDB's own: neither fsyncs (ClickHouse does not by default), so both survive
  the process being killed, and neither promises more when the machine loses power.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clickhouse_connect.driver.exceptions import OperationalError

from .frames import frame as _packed
from .frames import read_frames

_log = logging.getLogger(__name__)
# Retries of a failing apply: from 50 ms, doubling, at most 2 s apart.
_FIRST_RETRY = 0.05
_LAST_RETRY = 2.0
# Entries waiting for the applier before an append waits (see the module doc). A burst of
# that many writes is taken at full speed; the applier takes them all in its next call.
_MAX_PENDING = 512
# How long an append waits for room before its write fails as a store outage.
_APPEND_WAIT = 30.0
# The applier starts an apply at most this often unless a read waits for it or the backlog
# is half its bound: each apply writes a part per table, whatever its rows, and chDB spends
# ~4-5 ms of CPU on each (plus their merges), so under a stream of writes a short wait
# stores many writes for that cost instead of one or two. A write is acknowledged at its
# append, so it never waits for this.
_GATHER = 0.05
# Applied entries the file may hold before it is rewritten with the pending ones only: a
# restart replays at most this many again, well inside the tables' deduplication window
# (schema.DEDUP_WINDOW inserts), so each stores its rows once.
_COMPACT_AFTER = 512
# Frames other than a plain entry (statements, applied as they are) open with a control
# character no statement starts with.
ROWS = "\x01"  # one write's rows: JSON [[insert head, values], ...]
BATCH = "\x02"  # the applier takes the oldest N unbatched rows entries: JSON [batch id, N]
APPLIED = "\x03"  # that batch is applied: its id

Inserts = Sequence[tuple[str, str]]


class JournalClosed(RuntimeError):
    """The journal was closed: the write was not taken."""


def encode_entry(statements: str) -> bytes:
    """One frame as the file holds it: its length, its CRC-32, then the payload."""
    return b"".join(_packed(b"", statements.encode("utf-8")))


def read_entries(data: bytes) -> tuple[list[str], int]:
    """The payloads of the whole frames at the start of a journal file, and how many bytes
    after them were torn or corrupt (dropped)."""
    frames, end = read_frames(data)
    return [bytes(payload).decode("utf-8") for payload in frames], len(data) - end


def _first(head: str) -> int:
    return 0


def merged_statements(
    batch_id: str, entries: Sequence[Inserts], rank: Callable[[str], int] = _first
) -> str:
    """One ``INSERT .. VALUES`` per insert head over every entry's rows, with tokens made of
    ``batch_id``: the same batch always gives the same statements.

    Heads go in ``rank`` order (the registry's versions before the name claims before the
    labels that point at them), and heads of one rank in the order every entry lists them.
    """
    heads: list[str] = []
    values: dict[str, list[str]] = {}
    for inserts in entries:
        listed = [head for head, _ in inserts]
        for position, (head, rows) in enumerate(inserts):
            if head not in values:
                later = [heads.index(h) for h in listed[position + 1 :] if h in values]
                heads.insert(min(later) if later else len(heads), head)
                values[head] = []
            values[head].append(rows)
    heads.sort(key=rank)
    return "; ".join(
        f"{head} SETTINGS insert_deduplication_token = 'journal/{batch_id}/{n}' "
        f"VALUES {', '.join(values[head])}"
        for n, head in enumerate(heads)
    )


def backlog_of(data: bytes) -> int:
    """How many entries of a journal file are not known to be applied (for the benchmark and
    diagnostics: rows entries no applied batch covers, and every plain entry)."""
    frames, _ = read_entries(data)
    rows = sum(frame.startswith(ROWS) for frame in frames)
    plain = sum(not frame.startswith((ROWS, BATCH, APPLIED)) for frame in frames)
    counts: dict[str, int] = {}
    for frame in frames:
        if frame.startswith(BATCH):
            batch_id, count = json.loads(frame[1:])
            counts[str(batch_id)] = int(count)
    applied = sum(counts.get(frame[1:], 0) for frame in frames if frame.startswith(APPLIED))
    return plain + rows - applied


@dataclass(frozen=True)
class _Entry:
    """One appended entry: its sequence number, its frame's payload, and its rows (None for
    plain statements)."""

    seq: int
    payload: str
    inserts: Inserts | None


@dataclass(frozen=True)
class _Batch:
    """What one apply stores: the statements, and how many of the oldest entries they hold."""

    statements: str
    count: int
    batch_id: str | None  # None: plain statements, applied as they are


def _replay_plan(frames: list[str]) -> list[tuple[str | None, list[str]]]:
    """A killed process's file as the applies it still needs, in order: (batch id, payloads),
    a plain run with id None; batches already applied are left out, and rows entries no batch
    named form new batches (id "")."""
    entries = [f for f in frames if not f.startswith((BATCH, APPLIED))]
    owner: list[str | None] = [None] * len(entries)
    applied = {f[1:] for f in frames if f.startswith(APPLIED)}
    seen = 0  # entries before the frame being read
    for frame in frames:
        if frame.startswith(BATCH):
            batch_id, count = json.loads(frame[1:])
            free = [i for i in range(seen) if owner[i] is None and entries[i].startswith(ROWS)]
            for i in free[: int(count)]:
                owner[i] = str(batch_id)
        elif not frame.startswith(APPLIED):
            seen += 1
    plan: list[tuple[str | None, list[str]]] = []
    for entry, batch_id in zip(entries, owner, strict=True):
        key = batch_id if batch_id is not None else ("" if entry.startswith(ROWS) else None)
        if key is not None and key in applied:
            continue
        if plan and plan[-1][0] == key:
            plan[-1][1].append(entry)
        else:
            plan.append((key, [entry]))
    return plan


def _rows_of(payload: str) -> Inserts:
    return [(str(head), str(rows)) for head, rows in json.loads(payload[1:])]


class RegistryJournal:
    """Registry writes kept in a file, applied to the store by a thread of their own.

    ``execute`` runs statements (several joined by ``;``) on the store and raises on failure;
    ``rank`` orders the tables of a merged apply (see :func:`merged_statements`).
    """

    def __init__(
        self,
        path: Path,
        execute: Callable[[str], object],
        max_pending: int = _MAX_PENDING,
        append_wait: float = _APPEND_WAIT,
        compact_after: int = _COMPACT_AFTER,
        rank: Callable[[str], int] = _first,
        gather: float = _GATHER,
    ) -> None:
        self._path = path
        self._rank = rank
        self._gather = gather
        self._settling = 0  # reads waiting for the applier: it applies at once for them
        self._execute = execute
        self._max_pending = max_pending
        self._append_wait = append_wait
        self._compact_after = compact_after
        self._in_file = 0  # entries the file holds, applied or not (batch frames aside)
        self._cond = threading.Condition()
        self._pending: list[_Entry] = []
        self._appended = 0  # entries appended (their sequence numbers run 1, 2, ...)
        self._applied = 0  # entries applied, in order
        self._closed = False
        self._failure: BaseException | None = None
        # Applies and the entries they stored (diagnostics and tests).
        self.applies = 0
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
        frames, dropped = read_entries(data)
        if dropped:
            _log.warning(
                "registry journal %s: %d bytes after its last whole entry dropped (a write "
                "cut off by the process's end, never acknowledged)",
                self._path,
                dropped,
            )
            # New batch frames are appended below: they must follow the whole frames.
            os.truncate(self._path, len(data) - dropped)
        applied = 0
        for batch_id, payloads in _replay_plan(frames):
            if batch_id is None:
                self._execute("; ".join(payloads))
            else:
                if not batch_id:
                    # Named in the file before it runs, so a second crash replays it alike.
                    batch_id = uuid.uuid4().hex
                    with self._path.open("ab") as file:
                        file.write(encode_entry(BATCH + json.dumps([batch_id, len(payloads)])))
                rows = [_rows_of(p) for p in payloads]
                self._execute(merged_statements(batch_id, rows, self._rank))
            applied += len(payloads)
        if applied:
            _log.info("registry journal %s: %d writes applied on open", self._path, applied)
        self._path.write_bytes(b"")

    def append(self, statements: str) -> int:
        """Keep ``statements`` in the file; return the entry's sequence number once it is
        there (it is then applied in order, in the background, as it is)."""
        return self._append(statements, None)

    def append_rows(self, inserts: Inserts) -> int:
        """Keep one write's rows in the file: per table an ``INSERT INTO .. (columns)`` head
        and its ``VALUES`` rows, written inline. Return the entry's sequence number once it
        is there; the applier stores it with every entry waiting beside it, one insert per
        head."""
        # Text kept as it is (not escaped to ASCII): rows that are no valid UTF-8 fail here,
        # before the write is acknowledged, as a statement entry does, not in the applier.
        payload = json.dumps([list(pair) for pair in inserts], ensure_ascii=False)
        return self._append(ROWS + payload, inserts)

    def _append(self, payload: str, inserts: Inserts | None) -> int:
        frame = encode_entry(payload)
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
            self._pending.append(_Entry(self._appended, payload, inserts))
            self._cond.notify_all()
            return self._appended

    @property
    def backlog(self) -> int:
        """Entries appended and not applied yet (diagnostics and tests)."""
        with self._cond:
            return len(self._pending)

    def settle(self, timeout: float = 30.0) -> None:
        """Return once every entry appended before the call is applied (at once when all
        are); raise an ``OperationalError`` (a store outage) naming the store's error if they
        could not be applied within ``timeout``."""
        with self._cond:
            target = self._appended
            if self._applied >= target:
                return
            self._settling += 1
            self._cond.notify_all()
            try:
                applied = self._cond.wait_for(lambda: self._applied >= target, timeout)
            finally:
                self._settling -= 1
            if not applied:
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
        """Rewrite the file with the pending entries only (holding the lock, between two
        batches, so no append and no batch frame comes between): a process killed at any
        point leaves the old file or the new one, and either holds every pending entry."""
        fresh = self._path.with_name(self._path.name + ".compact")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"".join(encode_entry(entry.payload) for entry in self._pending))
        finally:
            os.close(fd)
        os.replace(fresh, self._path)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND, 0o600)
        self._in_file = len(self._pending)

    def _take(self) -> _Batch:
        """The next apply (holding the lock): the oldest pending entries of one kind, every
        one of them; a rows batch is named in the file first."""
        first = self._pending[0]
        count = 1
        plain = first.inserts is None
        while count < len(self._pending) and (self._pending[count].inserts is None) == plain:
            count += 1
        taken = self._pending[:count]
        if plain:
            return _Batch("; ".join(entry.payload for entry in taken), count, None)
        batch_id = uuid.uuid4().hex
        os.write(self._fd, encode_entry(BATCH + json.dumps([batch_id, count])))
        rows = [entry.inserts for entry in taken if entry.inserts is not None]
        return _Batch(merged_statements(batch_id, rows, self._rank), count, batch_id)

    def _gathered(self, until: float) -> bool:
        """Whether the applier should apply now (holding the lock): closing, a read waits, the
        backlog is half its bound, or the gathering time is over."""
        return (
            self._closed
            or self._settling > 0
            or len(self._pending) >= self._max_pending // 2
            or time.monotonic() >= until
        )

    def _run(self) -> None:
        delay = _FIRST_RETRY
        batch: _Batch | None = None
        began = time.monotonic() - self._gather
        while True:
            if batch is None:
                with self._cond:
                    self._cond.wait_for(lambda: self._pending or self._closed)
                    # Gather what arrives until ``gather`` after the last apply began.
                    until = began + self._gather
                    self._cond.wait_for(
                        functools.partial(self._gathered, until),
                        max(0.0, until - time.monotonic()),
                    )
                    if not self._pending:
                        return  # closed, nothing left
                    batch = self._take()
                began = time.monotonic()
            try:
                self._execute(batch.statements)
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
                continue  # the same batch again: its rows may be partly stored
            delay = _FIRST_RETRY
            with self._cond:
                if self._failure is not None:
                    _log.info("registry journal: the store took the waiting writes again")
                    self._failure = None
                self._applied = self._pending[batch.count - 1].seq
                self.applies += 1
                del self._pending[: batch.count]
                if not self._pending:
                    # Nothing left to apply: the file starts again empty (appends hold the
                    # same lock, so none is lost between the two).
                    os.ftruncate(self._fd, 0)
                    self._in_file = 0
                else:
                    if batch.batch_id is not None:
                        os.write(self._fd, encode_entry(APPLIED + batch.batch_id))
                    if self._in_file - len(self._pending) >= self._compact_after:
                        self._compact()
                self._cond.notify_all()
            batch = None
