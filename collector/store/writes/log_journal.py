"""The embedded store's request-log journal: a batch of records is kept once it is in a file,
and reaches chDB right behind, in large inserts.

Each chDB insert into the log writes a part per table and runs the log's materialised views,
a fixed cost of tens of milliseconds of CPU whatever the rows. An exporter that waits for each
answer (OpenTelemetry's ``BatchSpanProcessor``: one export of 512 spans in flight) then gets
one small insert per request, and that fixed cost sets its pace. The journal takes a request's
encoded rows (the chunk the group commit would have inserted), appends them to a file of its
own (one ``write`` call), and the request is acknowledged; a thread inserts every chunk waiting
when it is free, up to ``max_bytes`` at once, so the views' cost is paid once per many
requests.

What it keeps, and how (the registry's journal, :mod:`.journal`, keeps the same promises the
same way; its entries are statements, these are bytes):

- An entry is framed as ``length (4 bytes) | CRC-32 (4 bytes) | payload``, the payload's first
  byte saying what it is: a chunk of rows, a batch taken by the applier (its id and how many
  of the oldest chunks not yet taken it holds), or a batch applied. A process killed in the
  middle of an append leaves a torn last frame: the next open stores every whole chunk before
  it and drops the tail (it was never acknowledged: the request answers after the append).
- Applied twice, a chunk is stored once. A batch is named in the file before its insert, the
  insert carries ``insert_deduplication_token`` made of that name, and a batch that a killed
  process left named and not marked applied is inserted again as the same batch. The log's
  tables keep no deduplication window, so the second insert is a retried copy of each record:
  the log is idempotent by record key (``store/requests.py``), so pages, details, counts and
  exports read it once, as they read a client's retry.
- The file is emptied whenever every chunk appended is applied; under a steady stream it may
  never be, so once ``compact_bytes`` of applied chunks are in it, it is rewritten with the
  waiting ones only (between two batches, a new file renamed over it).
- **Reads settle**: :meth:`LogJournal.settle` returns once every chunk appended before it is
  inserted, so a read of the log sees each record acknowledged before it; while the store
  refuses (its inserts fail, or the backlog is full) a read does not wait and reads what is
  stored (ingest answers 503 meanwhile and ``/health`` says why), and it waits at most
  ``READ_WAIT`` seconds.
- **Bounded** as the group commit's buffer: at most ``max_pending_bytes`` of chunks wait for
  the store; an append waits up to ``wait`` seconds for room, then the request is refused
  (busy: 503 ``STORE_BUSY``). After a failed insert new chunks are refused at once (503
  ``STORE_UNAVAILABLE``) until the applier's retry of the same batch succeeds.
- Durability is chDB's own: neither fsyncs, so both survive the process being killed, and
  neither promises more when the machine loses power.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..connection import error_summary
from ..request_tables import SEARCH_INDEX
from .frames import frame, read_frames
from .group_commit import BufferClosed, BufferFull, WritesFailing
from .refusals import RefusingWriter

_log = logging.getLogger("promptrail.ingest")
ROWS = b"\x01"  # a chunk of encoded rows
BATCH = b"\x02"  # the applier takes the oldest N chunks not taken yet: JSON [batch id, N]
APPLIED = b"\x03"  # that batch is stored: its id
# A read waits at most this long for the journal, then reads what is stored (as a read waits
# for the write-behind's records, store/writes/behind.py).
READ_WAIT = 10.0
# Bytes of applied chunks the file may hold before it is rewritten with the waiting ones.
_COMPACT_BYTES = 64 << 20
# What one insert takes at most. An insert into the log costs a fixed ~50-110 ms of CPU beside
# its rows (each view's query, a part for each table) and every part is merged again: under a
# flood of requests inserts of 64 MiB cost ~8 µs of CPU a record less than inserts of 32 MiB
# (docs/benchmarks.md, "Larger inserts from the journal"), for ~60-100 MiB more at the peak.
INSERT_BYTES = 64 << 20
# A batch from this size up runs the log's views side by side (see _token): the flood's
# inserts are 64 MiB, one exporter's 1-4 MiB.
SIDE_BY_SIDE_BYTES = 16 << 20
# How long an apply gathers the chunks arriving once it could start (unless a read waits).
_GATHER = 0.005

Insert = Callable[[Sequence[bytes], dict[str, Any]], None]


def replay_plan(frames: Sequence[memoryview]) -> tuple[list[tuple[str, list[bytes]]], list[bytes]]:
    """A killed process's file as (the batches named and not applied, with their chunks) and
    the chunks no batch took, in order."""
    chunks: list[bytes] = []
    named: list[tuple[str, int, int]] = []  # batch id, first chunk, count
    applied: set[str] = set()
    taken = 0  # batches take the oldest chunks not taken: a pointer is enough
    for payload in frames:
        kind, body = bytes(payload[:1]), payload[1:]
        if kind == ROWS:
            chunks.append(bytes(body))
        elif kind == BATCH:
            batch_id, count = json.loads(bytes(body))
            named.append((str(batch_id), taken, int(count)))
            taken += int(count)
        elif kind == APPLIED:
            applied.add(bytes(body).decode())
    batches = [
        (batch_id, chunks[first : first + count])
        for batch_id, first, count in named
        if batch_id not in applied
    ]
    return batches, chunks[taken:]


def _write_all(fd: int, pieces: list[bytes]) -> int:
    """Write every piece (a regular file takes them in one call); return the bytes written."""
    total = sum(len(piece) for piece in pieces)
    written = os.writev(fd, pieces)
    if written < total:
        rest = b"".join(pieces)[written:]
        while rest:
            rest = rest[os.write(fd, rest) :]
    return total


def _token(batch_id: str, chunks: Sequence[bytes]) -> dict[str, Any]:
    """The settings of a batch's insert: its deduplication token, the log's text index left
    to the first merge of the batch's part, and, for a large batch, the log's views run side
    by side.

    Building the index in the insert cost ~8 µs of CPU a record; the merge that builds it
    from the part's rows costs no more than one merging indexed parts, and a search reads a
    part without it whole, with the same results (request_tables.SEARCH_INDEX).

    Every record reaches the store through this one thread's inserts, and the engine runs the
    log's views (its copies and indexes) one after the other on it. A large batch means
    records are waiting on this thread: its views then run on threads of their own (an insert
    of 20,000 records took 30 µs of wall a record instead of 36, for the same CPU), and under
    a flood of batches the collector took 20,700 records/s against 19,200 (docs/benchmarks.md,
    "The log's views side by side"). A small one means the requests set the pace (one
    exporter waiting for each answer): there the views' threads cost each insert up to 8 ms
    more CPU and took a core from the requests' lane, and OTLP with one exporter went from
    12,000-14,600 spans/s to 9,800-12,000, so small batches keep them in turn.
    """
    settings: dict[str, Any] = {
        "insert_deduplication_token": f"log/{batch_id}",
        "exclude_materialize_skip_indexes_on_insert": SEARCH_INDEX,
    }
    if sum(len(chunk) for chunk in chunks) >= SIDE_BY_SIDE_BYTES:
        settings["parallel_view_processing"] = 1
    return settings


class LogJournal(RefusingWriter):
    """Chunks of the request log's rows kept in a file, inserted by a thread of their own.

    ``insert(chunks, settings)`` stores chunks in one block (``RequestStore.insert``);
    ``probe()`` inserts no rows, to tell whether the store takes writes.
    """

    def __init__(
        self,
        path: Path,
        insert: Insert,
        probe: Callable[[], None] | None = None,
        max_bytes: int = INSERT_BYTES,
        max_pending_bytes: int = 128 << 20,
        wait: float = 5.0,
        retry_interval: float = 1.0,
        compact_bytes: int = _COMPACT_BYTES,
    ) -> None:
        self._path = path
        self._insert = insert
        self._probe = probe
        self._max_bytes = max(1, min(max_bytes, max_pending_bytes // 2))
        self._max_pending = max_pending_bytes
        self._wait = wait
        self._retry = retry_interval
        self._compact_bytes = compact_bytes
        self._cond = threading.Condition()
        self._queue: list[tuple[int, bytes]] = []  # (sequence number, chunk) not taken yet
        self._queued = 0  # bytes of the queue
        self._applying = 0  # bytes of the batch being inserted
        self._appended = 0  # chunks appended (sequence numbers run 1, 2, ...)
        self._applied = 0  # chunks stored, in order
        self._size = 0  # bytes in the file
        self._done_in_file = 0  # bytes of applied chunks in the file
        self._settling = 0  # reads waiting: the applier starts at once for them
        self._init_refusals()
        self._closed = False
        self.applies = 0  # inserts made (diagnostics and tests)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._thread = threading.Thread(target=self._run, name="promptrail-log-journal")
        self._thread.daemon = True
        self._thread.start()

    # -- opening -------------------------------------------------------------------------

    def _recover(self) -> None:
        """Store what a process that ended before storing it left in the file."""
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        frames, end = read_frames(data)
        if end < len(data):
            _log.warning(
                "request-log journal %s: %d bytes after its last whole entry dropped (an "
                "append cut off by the process's end, never acknowledged)",
                self._path,
                len(data) - end,
            )
            os.truncate(self._path, end)  # new batch frames must follow the whole frames
        batches, loose = replay_plan(frames)
        del frames, data
        # Chunks no batch took: named in the file before their insert, so a second crash
        # replays them as the same batches.
        while loose:
            size, count = 0, 0
            while count < len(loose) and (not count or size + len(loose[count]) <= self._max_bytes):
                size += len(loose[count])
                count += 1
            batch_id = uuid.uuid4().hex
            with self._path.open("ab") as file:
                file.write(b"".join(frame(BATCH, json.dumps([batch_id, count]).encode())))
            batches.append((batch_id, loose[:count]))
            loose = loose[count:]
        stored = 0
        for batch_id, chunks in batches:
            self._insert(chunks, _token(batch_id, chunks))
            stored += len(chunks)
        if stored:
            _log.info("request-log journal %s: %d batches stored on open", self._path, stored)
        self._path.write_bytes(b"")

    # -- appends -------------------------------------------------------------------------

    @property
    def held_bytes(self) -> int:
        """Bytes of records acknowledged and not stored yet (waiting, and being inserted)."""
        return self._queued + self._applying

    def submit(self, chunk: bytes) -> None:
        """Keep ``chunk`` (rows in the store's insert format) in the file; return once it is
        there. It is then inserted in order, in the background.

        Raises :class:`WritesFailing` while the store's inserts fail, :class:`BufferFull` when
        no room frees within the wait, :class:`BufferClosed` once closed, and ``OSError`` when
        the file takes no append (nothing of the chunk is then kept).
        """
        pieces = frame(ROWS, chunk)
        deadline = time.monotonic() + self._wait
        with self._cond:
            while True:
                if self._closed:
                    raise BufferClosed("the collector is shutting down")
                if self._failing_since is not None:
                    raise WritesFailing(self._failing_message())
                held = self.held_bytes
                if not held or held + len(chunk) <= self._max_pending:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    self._full = True
                    self._cond.notify_all()  # reads stop waiting for a backlog that is stuck
                    raise BufferFull(self._full_message())
                self._cond.wait(timeout=min(left, 0.1))
            if not self.held_bytes:
                self._progress_at = time.monotonic()
            try:
                self._size += _write_all(self._fd, pieces)
            except OSError:
                os.ftruncate(self._fd, self._size)  # no torn frame before the next append
                raise
            self._appended += 1
            self._queue.append((self._appended, chunk))
            self._queued += len(chunk)
            if len(self._queue) == 1 or self._queued >= self._max_bytes:
                self._cond.notify_all()

    # -- reads and state ------------------------------------------------------------------

    def settle(self, timeout: float = READ_WAIT) -> None:
        """Return once every chunk appended before the call is stored; at once while the store
        refuses (see the module), or after ``timeout`` seconds: the read then reads what is
        stored."""
        with self._cond:
            target = self._appended
            if self._applied >= target:
                return
            self._settling += 1
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            try:
                while (
                    self._applied < target
                    and self._failing_since is None
                    and not self._full
                    and not self._closed
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait(timeout=left)
            finally:
                self._settling -= 1

    def probe(self) -> None:
        """Try the store now with an insert of no rows: a failure is taken as a failed insert
        (new chunks are refused until the store takes writes again)."""
        if self._probe is not None:
            self._attempt(self._probe)

    def close(self, timeout: float = 30.0) -> None:
        """Store what is waiting, stop the thread, empty and close the file. What the store
        did not take within ``timeout`` stays in the file for the next open."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            if not self._queue and not self._applying:
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = -1

    def _run(self) -> None:
        while True:
            with self._cond:
                probe = self._idle()
                if probe is None and not self._queue:
                    return  # closed, everything stored
                if probe is None:
                    batch_id, chunks, last = self._take()
            if probe is not None:
                self._attempt(probe)
                continue
            if not self._apply(batch_id, chunks):
                return  # closing with a store that refuses: left in the file
            with self._cond:
                self._applied_up_to(batch_id, last, sum(len(c) for c in chunks))

    def _idle(self) -> Callable[[], None] | None:
        """Wait (holding the lock) until chunks wait and their gathering is over, or it is
        time to probe a failing store (returned), or the journal closed with none waiting."""
        while not self._closed and not self._queue:
            if self._failing_since is None or self._probe is None:
                self._cond.wait()
            elif not self._cond.wait(timeout=self._retry):
                return self._probe
        deadline = time.monotonic() + _GATHER
        while (
            self._queue
            and not self._closed
            and not self._settling
            and self._queued < self._max_bytes
        ):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(timeout=left)
        return None

    def _take(self) -> tuple[str, list[bytes], int]:
        """The next batch (holding the lock): the oldest chunks, up to ``max_bytes`` (at least
        one), named in the file first."""
        size, count = 0, 0
        while count < len(self._queue) and (
            not count or size + len(self._queue[count][1]) <= self._max_bytes
        ):
            size += len(self._queue[count][1])
            count += 1
        taken, self._queue = self._queue[:count], self._queue[count:]
        self._queued -= size
        self._applying = size
        batch_id = uuid.uuid4().hex
        self._size += _write_all(self._fd, frame(BATCH, json.dumps([batch_id, count]).encode()))
        self._cond.notify_all()  # room for appends
        return batch_id, [chunk for _, chunk in taken], taken[-1][0]

    def _apply(self, batch_id: str, chunks: list[bytes]) -> bool:
        """Insert one batch until it is stored (the same batch each time: it may be partly
        stored); False when the journal closed and the store still refused it."""
        while True:
            if self._attempt(lambda: self._insert(chunks, _token(batch_id, chunks))) is None:
                return True
            with self._cond:
                if self._closed:
                    return False
                self._cond.wait(timeout=self._retry)

    def _applied_up_to(self, batch_id: str, last: int, size: int) -> None:
        """Holding the lock: chunks up to ``last`` are stored; the file is emptied when
        nothing waits, else the batch is marked applied (and the file compacted)."""
        self._applied = last
        self._applying = 0
        self.applies += 1
        if not self._queue:
            os.ftruncate(self._fd, 0)
            self._size = self._done_in_file = 0
        else:
            self._size += _write_all(self._fd, frame(APPLIED, batch_id.encode()))
            self._done_in_file += size
            if self._done_in_file >= self._compact_bytes:
                self._compact()
        self._cond.notify_all()

    def _compact(self) -> None:
        """Rewrite the file with the waiting chunks only (holding the lock, between two
        batches): a process killed at any point leaves the old file or the new one, and
        either holds every waiting chunk."""
        fresh = self._path.with_name(self._path.name + ".compact")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            size = sum(_write_all(fd, frame(ROWS, chunk)) for _, chunk in self._queue)
        finally:
            os.close(fd)
        os.replace(fresh, self._path)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND, 0o600)
        self._size, self._done_in_file = size, 0

    def _attempt(self, write: Callable[[], None]) -> Exception | None:
        """Run a write; record whether the store takes writes; return its failure."""
        try:
            write()
        except Exception as exc:
            with self._cond:
                if self._insert_failed(exc):
                    _log.error(
                        "request-log journal: inserts failing, records kept in %s: %s",
                        self._path,
                        error_summary(exc),
                    )
            return exc
        with self._cond:
            self._insert_stored()
        return None


# -- one journal per embedded database in the process ------------------------------------

# The journals open in this process, by file: every writer of one database's log shares its
# journal (two collectors on one embedded store in a process, as the tests run them), and
# every reader of that log settles it.
_open: dict[Path, tuple[LogJournal, Callable[[], None], list[int]]] = {}
_open_lock = threading.Lock()


def acquire(path: Path, make: Callable[[], tuple[LogJournal, Callable[[], None]]]) -> LogJournal:
    """The journal at ``path`` for one more user, made by ``make`` (the journal and what closes
    its applier) for the first; the journal's replay runs there, before anything reads."""
    with _open_lock:
        held = _open.get(path)
        if held is None:
            journal, done = make()
            _open[path] = (journal, done, [1])
            return journal
        held[2][0] += 1
        return held[0]


def release(path: Path) -> None:
    """One user is done with the journal at ``path``; the last one stores what waits and
    closes it."""
    with _open_lock:
        held = _open.get(path)
        if held is None:
            return
        held[2][0] -= 1
        if held[2][0] > 0:
            return
        del _open[path]
    journal, done, _ = held
    try:
        journal.close()
    finally:
        done()


def settle_path(path: Path | None) -> None:
    """Wait for the journal at ``path``, if one is open (see :meth:`LogJournal.settle`)."""
    if path is None:
        return
    held = _open.get(path)
    if held is not None:
        held[0].settle()


class SettlingClient:
    """A store client whose queries and commands first settle a log journal: a read of the
    request log then sees every record acknowledged before it (the registry's reads wait for
    their journal the same way, ``store/prompts/group_commit.py``)."""

    def __init__(self, client: Any, path: Path | None) -> None:
        self._client = client
        self._path = path

    @property
    def wrapped(self) -> Any:
        """The client this one settles before."""
        return self._client

    def query(self, *args: Any, **kwargs: Any) -> Any:
        """The client's ``query``, once the journal is settled."""
        settle_path(self._path)
        return self._client.query(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        """The client's ``command`` (a delete's tombstones), once the journal is settled."""
        settle_path(self._path)
        return self._client.command(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
