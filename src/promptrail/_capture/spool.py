"""The disk side of an outage: records the collector could not take, kept in files until it can.

Where (docs/sdk.md, "Outages"): under the cache directory (``_disk.py``),
``spool/<scope>/<kind>/`` holds the files of one collector URL and API key (``scope`` is a
hash of both, so no key is written to disk and a process with another key or URL never even
lists them) and one kind of item (records, scores).

How the files stay whole and bounded (learnt from Vector's and Fluent Bit's disk buffers and
Azure Monitor's exporter, which write whole files and checksum what they read back):

- A process only ever creates files, each written to a hidden temporary name and renamed into
  place, so a reader never sees a half-written file; several processes (gunicorn workers)
  write side by side, each to names of its own (time, pid, sequence).
- A file is a run of blocks (up to 256 records, zlib level 1), each with a magic, its record
  count, its length and a CRC-32 of its compressed bytes: a torn or corrupt file loses at most
  its bad blocks; reading goes on at the next magic.
- The file name carries its record count, so the bounds (total bytes, age) drop the oldest
  files first and count what they drop without reading them.
- Replay is decided by an ``flock`` on ``replay.lock``: one process at a time sends files
  (any process's, orphans of a killed one included), oldest first, and deletes each once the
  collector settled it. A kill between the send and the delete resends a file: record ids
  make that idempotent at the collector.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._disk import private_dir, scope_of, write_whole
from .._settings import byte_setting
from .reachability import seconds
from .stats import CaptureStats

logger = logging.getLogger("promptrail")

DEFAULT_SPOOL_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_SPOOL_MAX_AGE = 7 * 24 * 3600.0
# Records per file (and per replayed post) and per block: a bad block loses at most this many.
FILE_RECORDS = 4096
FILE_BYTES = 4 * 1024 * 1024
_BLOCK_RECORDS = 256
_MAGIC = b"PRS1"
_HEADER = struct.Struct("<4sIII")  # magic, record count, payload length, CRC-32 of the payload
_SUFFIX = ".spool"
# A temporary file this old was left by a process killed mid-write: nobody will rename it.
_STALE_TEMP_SECONDS = 600.0


def spool_bound(value: int | None) -> int:
    """``value``, else ``PROMPTRAIL_SPOOL_MAX_BYTES``, else 256 MiB."""
    return byte_setting(
        value, "PROMPTRAIL_SPOOL_MAX_BYTES", DEFAULT_SPOOL_MAX_BYTES, "spool_max_bytes"
    )


def encode_blocks(records: list[bytes]) -> bytes:
    """The file body of ``records``: blocks of up to ``_BLOCK_RECORDS``, each checksummed."""
    parts: list[bytes] = []
    for start in range(0, len(records), _BLOCK_RECORDS):
        chunk = records[start : start + _BLOCK_RECORDS]
        # A record is compact JSON: it never holds a raw newline, so one separates them.
        # Level 1: records repeat themselves, so it shrinks them several times for little CPU.
        payload = zlib.compress(b"\n".join(chunk), 1)
        parts.append(_HEADER.pack(_MAGIC, len(chunk), len(payload), zlib.crc32(payload)))
        parts.append(payload)
    return b"".join(parts)


def decode_blocks(data: bytes) -> list[bytes]:
    """Every record of the whole blocks in ``data``; a bad block is skipped, not the rest."""
    records: list[bytes] = []
    position = 0
    size = _HEADER.size
    while position + size <= len(data):
        magic, count, length, crc = _HEADER.unpack_from(data, position)
        start = position + size
        payload = data[start : start + length]
        if magic == _MAGIC and len(payload) == length and zlib.crc32(payload) == crc:
            chunk = _records_of(payload)
            if len(chunk) == count:
                records.extend(chunk)
                position = start + length
                continue
        # Torn or corrupt: resume at the next block's magic, if any.
        found = data.find(_MAGIC, position + 1)
        if found < 0:
            break
        position = found
    return records


def _records_of(payload: bytes) -> list[bytes]:
    try:
        text = zlib.decompress(payload)
    except zlib.error:
        return []  # a block whose checksum matched by chance: counted as lost
    return text.split(b"\n") if text else []


@dataclass(frozen=True)
class SpoolFile:
    """One complete spool file: its path, its record count (from its name) and its size."""

    path: Path
    records: int
    size: int
    written_ns: int
    pid: int  # the process that wrote it


def _parse(path: Path) -> SpoolFile | None:
    # <time_ns>-<pid>-<seq>-<records>.spool
    parts = path.name.removesuffix(_SUFFIX).split("-")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    try:
        size = path.stat().st_size
    except OSError:
        return None  # replayed and deleted meanwhile
    return SpoolFile(path, int(parts[3]), size, int(parts[0]), int(parts[1]))


@dataclass
class SpoolLoss:
    """Records the spool had to give up on, by reason (``spool_full``, ``spool_expired``,
    ``spool_corrupt``)."""

    reason: str
    records: int


class Spool:
    """The files of one collector URL, key and kind of item; safe to share between processes."""

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
        max_age: float = DEFAULT_SPOOL_MAX_AGE,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._sequence = itertools.count()
        self._lock_path = directory / "replay.lock"

    @classmethod
    def open(
        cls,
        cache_dir: Path,
        base_url: str,
        api_key: str,
        kind: str,
        *,
        max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
        max_age: float = DEFAULT_SPOOL_MAX_AGE,
    ) -> Spool:
        """The spool of ``kind`` items for this URL and key under ``cache_dir`` (OSError if it
        cannot be created or written)."""
        private_dir(cache_dir)
        directory = private_dir(cache_dir / "spool" / scope_of(base_url, api_key) / kind)
        return cls(directory, max_bytes=max_bytes, max_age=max_age)

    def write(self, records: list[bytes]) -> list[SpoolLoss]:
        """Keep ``records`` in new files (oldest first), then apply the bounds.

        Raises OSError when they could not be written (the caller keeps them in memory).
        Returns what the bounds dropped to make room.
        """
        for chunk in _chunks(records):
            name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._sequence):06d}-{len(chunk)}"
            write_whole(self.directory / f"{name}{_SUFFIX}", encode_blocks(chunk))
        return self.enforce_bounds()

    def files(self) -> list[SpoolFile]:
        """The complete files, oldest first."""
        try:
            names = sorted(p for p in self.directory.iterdir() if p.name.endswith(_SUFFIX))
        except OSError:
            return []
        return [f for f in map(_parse, names) if f is not None]

    def enforce_bounds(self) -> list[SpoolLoss]:
        """Drop files past the age bound, then the oldest until within the size bound."""
        files = self.files()
        losses: list[SpoolLoss] = []
        oldest_kept = time.time_ns() - int(self.max_age * 1e9)
        total = sum(f.size for f in files)
        for spool_file in files:
            expired = spool_file.written_ns < oldest_kept
            if not expired and total <= self.max_bytes:
                break
            total -= spool_file.size
            if self._remove(spool_file.path):
                reason = "spool_expired" if expired else "spool_full"
                losses.append(SpoolLoss(reason, spool_file.records))
        return _merged(losses)

    def read(self, spool_file: SpoolFile) -> tuple[list[bytes], int]:
        """The records of a file that can still be read, and how many it lost (bad blocks)."""
        try:
            data = spool_file.path.read_bytes()
        except FileNotFoundError:
            return [], 0  # another process replayed it
        records = decode_blocks(data)
        return records, max(0, spool_file.records - len(records))

    def rewrite(self, spool_file: SpoolFile, records: list[bytes]) -> None:
        """Replace a file that lost blocks by one of its readable ``records`` (same place in
        the order), so its loss is not found, counted and reported again."""
        if not records:
            self._remove(spool_file.path)
            return
        name = spool_file.path.name.rsplit("-", 1)[0]
        with contextlib.suppress(OSError):
            write_whole(self.directory / f"{name}-{len(records)}{_SUFFIX}", encode_blocks(records))
            self._remove(spool_file.path)

    def remove(self, spool_file: SpoolFile) -> None:
        """Delete a file the collector settled."""
        self._remove(spool_file.path)

    @contextlib.contextmanager
    def replaying(self) -> Iterator[bool]:
        """Whether this process holds the replay lock (for the ``with`` block); never waits."""
        try:
            import fcntl
        except ImportError:  # Windows: no flock; one process per spool is assumed there
            yield True
            return
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            self._clean_temporaries()
            yield True
        finally:
            os.close(fd)  # closing releases the lock (as does the holder's death)

    def _clean_temporaries(self) -> None:
        cutoff = time.time() - _STALE_TEMP_SECONDS
        with contextlib.suppress(OSError):
            for path in self.directory.iterdir():
                if path.name.endswith(".tmp") and path.stat().st_mtime < cutoff:
                    self._remove(path)

    @staticmethod
    def _remove(path: Path) -> bool:
        try:
            path.unlink()
        except FileNotFoundError:
            return False  # another process got there first: it counts it
        except OSError:
            return False
        return True


# Replay of the disk spool goes alongside live records at most this fast (records per second),
# so a backlog of hours does not crowd out the present or flood a collector just back; a flush
# replays as fast as the collector takes it.
REPLAY_RECORDS_PER_SECOND = 20_000
# How often a process looks for files other processes left (it always looks at start and after
# spilling its own).
_RESCAN_SECONDS = 30.0

# What one post of a batch came to: (records posted, records stored, reason for the others).
Settle = Callable[[int, int, str], None]
# The sender's post of a batch with its retries: (batch, deadline, request timeout, settle,
# patient) -> whether the collector settled it.
Post = Callable[[list[bytes], float, float | None, Settle, bool], bool]


class SpoolBacklog:
    """A sender's side of its spool: spills what the collector could not take into files and
    replays the files (this process's and any other's) once it is back.

    The sender calls it under its send lock; counters change under the counters' lock, so a
    snapshot never sees a record in two places.
    """

    def __init__(
        self, spool: Spool, stats: CaptureStats, post: Post, stopping: threading.Event, kind: str
    ) -> None:
        self.spool = spool
        self._stats = stats
        self._post = post
        self._stopping = stopping
        self._kind = kind
        self._warned_bounds = False
        # Files may be waiting from an earlier run: look at once. Then after each spill, and
        # every _RESCAN_SECONDS for files other processes left.
        self.waiting = True
        self._scanned = time.monotonic()
        self._not_before = 0.0
        # Other processes' files this replay found (path: records) and what of them went.
        self._others: dict[Path, int] = {}
        self._others_sent = 0
        self._sending_other = False

    @property
    def place(self) -> str:
        """The spool's directory, as log lines say it."""
        return str(self.spool.directory)

    # -- spill -------------------------------------------------------------------------------

    def spill(self, records: list[bytes]) -> list[SpoolLoss] | None:
        """Write ``records`` to new files; what the bounds dropped to make room, or None (one
        warning said why) when they could not be written: the caller keeps them in memory."""
        try:
            losses = self.spool.write(records)
        except OSError as exc:
            logger.warning(
                "promptrail: cannot write %s to %s (%s); they wait in memory only",
                self._kind,
                self.spool.directory,
                exc.strerror or exc,
            )
            return None
        self.waiting = True
        return losses

    def count_losses(self, losses: list[SpoolLoss]) -> None:
        """Count what the spool gave up on (under the counters' lock); warn once."""
        for loss in losses:
            self._stats.spool_drop(loss.reason, loss.records)
        if losses and not self._warned_bounds:
            self._warned_bounds = True
            logger.warning(
                "promptrail: the spool at %s is over its bounds (%d MiB, %s); its oldest %s "
                "are dropped (counted in promptrail.stats(); init(spool_max_bytes=..., "
                "spool_max_age=...) or PROMPTRAIL_SPOOL_MAX_BYTES raise them)",
                self.place,
                self.spool.max_bytes >> 20,
                seconds(self.spool.max_age),
                self._kind,
            )

    # -- replay ------------------------------------------------------------------------------

    def due(self) -> bool:
        """Whether a shipper's round should replay now (files known or worth a new look)."""
        now = time.monotonic()
        if not self.waiting and now - self._scanned >= _RESCAN_SECONDS:
            self.waiting = True
        return self.waiting and now >= self._not_before

    def replay(self, deadline: float, request_timeout: float | None, *, everything: bool) -> bool:
        """Send spool files, oldest first, while the collector takes them.

        ``everything`` (a flush): until none is left or the deadline, retrying with backoff;
        else (a shipper's round) one attempt per file, at most ``REPLAY_RECORDS_PER_SECOND``.
        Only the holder of the spool's replay lock sends: other processes' files (orphans of
        a killed one too) included. True when no file is left.
        """
        if self._stopping.is_set():
            return False
        if not everything and not self.due():
            return not self.waiting
        with self.spool.replaying() as mine:
            if not mine:
                # Another process is replaying this spool: look again later.
                self.waiting = False
                self._scanned = time.monotonic()
                return False
            self._scanned = time.monotonic()
            # Files that aged past the bound while nobody could send them go unsent, counted.
            with self._stats.lock:
                self.count_losses(self.spool.enforce_bounds())
            files = self.spool.files()
            self._note_others(files)
            for spool_file in files:
                if time.monotonic() >= deadline or (
                    not everything and time.monotonic() < self._not_before
                ):
                    return False
                if not self._replay_file(spool_file, deadline, request_timeout, everything):
                    return False
            self.waiting = False
            self._say_others_done()
            return True

    def _replay_file(
        self, spool_file: SpoolFile, deadline: float, request_timeout: float | None, patient: bool
    ) -> bool:
        """Post one file's records; True once the collector settled them (the file is gone)."""
        spool = self.spool
        records, lost = spool.read(spool_file)
        if lost:
            self._stats.spool_drop("spool_corrupt", lost)
            logger.warning(
                "promptrail: %d spooled %s lost: %s is torn or corrupt (the rest of it is sent)",
                lost,
                self._kind,
                spool_file.path,
            )
        self._sending_other = spool_file.path in self._others
        if records and not self._post(
            records, deadline, request_timeout, self._settle_replayed, patient
        ):
            if lost:
                # Its good blocks are rewritten whole, so the loss is counted and said once.
                spool.rewrite(spool_file, records)
            return False
        spool.remove(spool_file)
        self._not_before = time.monotonic() + len(records) / REPLAY_RECORDS_PER_SECOND
        return True

    def _settle_replayed(self, count: int, exported: int, reason: str) -> None:
        with self._stats.lock:
            self._stats.add("replayed", exported)
            if count > exported:
                self._stats.spool_drop(reason, count - exported)
        if self._sending_other:
            self._others_sent += exported

    def _note_others(self, files: list[SpoolFile]) -> None:
        """Say once when this process starts replaying files another process left."""
        me = os.getpid()
        found = {f.path: f.records for f in files if f.pid != me and f.path not in self._others}
        if not found:
            return
        if not self._others:
            logger.info(
                "promptrail: replaying %d %s that another process left in the spool at %s",
                sum(found.values()),
                self._kind,
                self.place,
            )
        self._others.update(found)

    def _say_others_done(self) -> None:
        """Say once, when no file is left, how many of the others' records went."""
        if not self._others:
            return
        logger.info(
            "promptrail: replayed %d of %d %s that another process left in the spool at %s",
            self._others_sent,
            sum(self._others.values()),
            self._kind,
            self.place,
        )
        self._others = {}
        self._others_sent = 0


def _chunks(records: list[bytes]) -> Iterator[list[bytes]]:
    """Split ``records`` into file-sized runs (a file is one replayed post)."""
    chunk: list[bytes] = []
    size = 0
    for record in records:
        if chunk and (len(chunk) >= FILE_RECORDS or size + len(record) > FILE_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += len(record)
    if chunk:
        yield chunk


def _merged(losses: list[SpoolLoss]) -> list[SpoolLoss]:
    totals: dict[str, int] = {}
    for loss in losses:
        totals[loss.reason] = totals.get(loss.reason, 0) + loss.records
    return [SpoolLoss(reason, count) for reason, count in totals.items()]
