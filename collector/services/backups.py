"""Back up the embedded store with its export files, and restore it, as background jobs.

A backup directory holds::

    clickhouse/              ClickHouse's own BACKUP of the database (File engine)
    exports/                 the finished export files
    promptrail-backup.json   written last, so only a complete backup has it

A restore goes into a store that holds nothing yet (a new data dir), or replaces the whole
database when asked to; it never merges a backup into data already there (the derived tables,
such as the analytics rollup, would count the merged records twice). Afterwards the schema
migrations run, so a backup of an older promptrail comes back at the current schema.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from promptrail import __version__

from ..errors import NotFound, ValidationFailed
from ..store.backups import BackupStore, Operation
from ..store.migrations import MIGRATIONS

logger = logging.getLogger("promptrail.backups")

MANIFEST_NAME = "promptrail-backup.json"
FORMAT = 1
RUNNING, COMPLETED, FAILED = "running", "completed", "failed"
_POLL_SECONDS = 0.2
# Export files by the names ExportService gives them; a ``.part`` file is an export at work.
_EXPORT_FILE = re.compile(r"export_[0-9a-f]+\.(csv|jsonl)")


@dataclass(frozen=True)
class BackupManifest:
    """What a backup directory holds, as ``promptrail-backup.json`` says."""

    format: int
    promptrail_version: str
    database: str
    schema_version: int
    created_at: str
    export_files: int


@dataclass(frozen=True)
class BackupJob:
    """One backup or restore: where, how far it got, and how it ended."""

    job_id: str
    kind: str
    directory: str
    status: str = RUNNING
    error: str = ""
    total_bytes: int = 0
    done_bytes: int = 0


class BackupService:
    """Run backups and restores of one database, one at a time, on a worker thread."""

    def __init__(self, store: BackupStore, exports_dir: Path, embedded: bool) -> None:
        self._store = store
        self._exports = exports_dir
        self._embedded = embedded
        self._jobs: dict[str, BackupJob] = {}
        self._lock = threading.Lock()

    def start_backup(self, directory: Path) -> BackupJob:
        """Check ``directory`` (new or empty) and start backing up into it."""
        self._check_embedded()
        directory = _absolute(directory)
        if directory.exists() and not directory.is_dir():
            raise ValidationFailed("directory", f"{directory} exists and is not a directory")
        if directory.is_dir() and any(directory.iterdir()):
            raise ValidationFailed(
                "directory",
                f"{directory} exists and is not empty: back up into a new or empty directory",
            )
        return self._start("backup", directory, lambda job: self._backup(job, directory))

    def start_restore(self, directory: Path, replace_data: bool) -> BackupJob:
        """Check the backup at ``directory`` and the target, and start restoring."""
        self._check_embedded()
        directory = _absolute(directory)
        manifest = read_manifest(directory)
        latest = MIGRATIONS[-1].version
        if manifest.schema_version > latest:
            raise ValidationFailed(
                "directory",
                f"{directory} was made by a newer promptrail ({manifest.promptrail_version}, "
                f"schema {manifest.schema_version}; this one knows {latest}): upgrade first",
            )
        held = self._store.stored_rows()
        if held and not replace_data:
            raise ValidationFailed(
                "replace",
                f"the store already holds data ({held} row{'s' if held != 1 else ''}): restore "
                "into a new --data-dir, "
                "or pass --replace to replace everything in it with the backup",
            )
        return self._start("restore", directory, lambda job: self._restore(job, manifest))

    def job(self, job_id: str) -> BackupJob:
        """Return the current state of a job of this process."""
        with self._lock:
            found = self._jobs.get(job_id)
        if found is None:
            raise NotFound(f"Backup job '{job_id}' not found", {"job_id": job_id})
        return found

    # -- the jobs ----------------------------------------------------------------------------

    def _check_embedded(self) -> None:
        if not self._embedded:
            raise ValidationFailed(
                "store",
                "promptrail backs up the embedded store only; with a ClickHouse server use its "
                "BACKUP and RESTORE (docs/deploy.md)",
            )

    def _start(self, kind: str, directory: Path, work: Callable[[str], None]) -> BackupJob:
        job = BackupJob(job_id=f"{kind}_{uuid.uuid4().hex}", kind=kind, directory=str(directory))
        with self._lock:
            if any(j.status == RUNNING for j in self._jobs.values()):
                raise ValidationFailed("directory", "a backup or restore is already running")
            self._jobs[job.job_id] = job
        threading.Thread(target=self._run, args=(job.job_id, work), daemon=True).start()
        return job

    def _run(self, job_id: str, work: Callable[[str], None]) -> None:
        try:
            work(job_id)
        except Exception as exc:
            logger.warning("%s failed: %s", job_id, exc)
            self._update(job_id, status=FAILED, error=clickhouse_reason(str(exc)))
            return
        self._update(job_id, status=COMPLETED)

    def _update(self, job_id: str, **changes: object) -> None:
        with self._lock:
            self._jobs[job_id] = replace(self._jobs[job_id], **changes)  # type: ignore[arg-type]

    def _backup(self, job_id: str, directory: Path) -> None:
        created = not directory.exists()
        try:
            # Only the collector's user may read it: it holds key hashes and every payload.
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            target = directory / "clickhouse"
            operation = self._store.start_backup(target)
            self._follow(job_id, operation, lambda state: _size(target))
            copied = _copy_exports(self._exports, directory / "exports")
            manifest = BackupManifest(
                format=FORMAT,
                promptrail_version=__version__,
                database=self._store.database,
                schema_version=self._store.schema_version(),
                created_at=datetime.now(UTC).isoformat(),
                export_files=copied,
            )
            (directory / MANIFEST_NAME).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
        except Exception:
            _clear(directory, remove=created)
            raise
        logger.info("backed up %s to %s", self._store.database, directory)

    def _restore(self, job_id: str, manifest: BackupManifest) -> None:
        directory = Path(self.job(job_id).directory)
        self._store.drop()
        operation = self._store.start_restore(directory / "clickhouse", manifest.database)
        self._follow(job_id, operation, lambda state: state.read_bytes)
        self._store.migrate()
        _copy_exports(directory / "exports", self._exports)
        logger.info("restored %s from %s", self._store.database, directory)

    def _follow(self, job_id: str, operation: str, done: Callable[[Operation], int]) -> None:
        while True:
            state = self._store.operation(operation)
            self._update(job_id, total_bytes=state.total_bytes, done_bytes=done(state))
            if not state.running:
                break
            time.sleep(_POLL_SECONDS)
        if not state.succeeded:
            raise RuntimeError(state.error or f"ClickHouse ended it as {state.status}")
        self._update(job_id, done_bytes=state.total_bytes)


def read_manifest(directory: Path) -> BackupManifest:
    """Return what a backup directory holds, or 400 naming why it is not a backup."""
    if not directory.is_dir():
        raise ValidationFailed("directory", f"{directory} does not exist")
    try:
        values = json.loads((directory / MANIFEST_NAME).read_text())
        manifest = BackupManifest(**values)
    except (OSError, ValueError, TypeError):
        raise ValidationFailed(
            "directory",
            f"{directory} is not a promptrail backup (no readable {MANIFEST_NAME})",
        ) from None
    if manifest.format != FORMAT or not (directory / "clickhouse" / ".backup").is_file():
        raise ValidationFailed("directory", f"{directory} is not a complete promptrail backup")
    return manifest


def clickhouse_reason(text: str) -> str:
    """Return ClickHouse's message without its code prefix and stack trace."""
    text = text.split("Stack trace", 1)[0].strip().rstrip(",").strip()
    return re.sub(r"^Code: \d+\. DB::Exception: ", "", text)


def _absolute(directory: Path) -> Path:
    if not directory.is_absolute():
        raise ValidationFailed("directory", "directory must be an absolute path")
    return directory


def _size(directory: Path) -> int:
    """Count the bytes under ``directory`` so far (files come and go while ClickHouse writes)."""
    total = 0
    for path in directory.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


def _copy_exports(source: Path, target: Path) -> int:
    files = [p for p in source.glob("export_*") if _EXPORT_FILE.fullmatch(p.name)]
    if files:
        target.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy2(path, target / path.name)
    return len(files)


def _clear(directory: Path, remove: bool) -> None:
    """Undo a failed backup: what it wrote in ``directory``, and the directory if it made it."""
    if remove:
        shutil.rmtree(directory, ignore_errors=True)
        return
    for child in directory.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
