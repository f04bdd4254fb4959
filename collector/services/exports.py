"""Export jobs: start, run in the background, survive restarts, expire after retention."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from ..errors import ExportNotFound
from ..models.requests import ExportCreate
from ..store.exports import ExportJob, ExportStore
from ..store.request_filters import RequestFilter
from ..store.writes import PendingWrites
from .dates import utc_now_ms
from .requests import environments_of, kinds_of, request_filter, score_tests

logger = logging.getLogger("promptrail.exports")

PROCESSING, COMPLETED, FAILED, EXPIRED = "processing", "completed", "failed", "expired"
_EXTENSIONS = {"csv": "csv", "json": "jsonl"}
# A running job's row is touched this often; a processing job untouched for STALE_AFTER has
# lost its collector (crash, restart) and is picked up again by any collector.
HEARTBEAT = timedelta(seconds=20)
STALE_AFTER = timedelta(seconds=90)


class ExportService:
    """Create export jobs and run them on worker threads of this collector."""

    def __init__(
        self,
        store: ExportStore,
        export_dir: Path,
        retention: timedelta,
        pending: PendingWrites | None = None,
    ) -> None:
        self._store = store
        self._pending = pending
        self._dir = export_dir
        self._retention = retention
        self._running: dict[str, ExportJob] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._maintainer: threading.Thread | None = None

    # -- API ---------------------------------------------------------------------------------

    def create(self, project: str, body: ExportCreate) -> ExportJob:
        """Record a new job as processing and start it."""
        _filters(body)  # refuse bad dates before anything is stored
        now = utc_now_ms()
        export_id = f"export_{uuid.uuid4().hex}"
        job = ExportJob(
            project=project,
            export_id=export_id,
            status=PROCESSING,
            format=body.format,
            filters=body.filters.model_dump(exclude_none=True),
            include_metadata=body.include_metadata,
            file_path=str(self._dir / f"{export_id}.{_EXTENSIONS[body.format]}"),
            row_count=0,
            error="",
            created_at=now,
            updated_at=now,
        )
        if self._pending is not None:
            self._pending.wait(project)
        self._store.save(job)
        self._start(job)
        return job

    def get(self, project: str, export_id: str) -> ExportJob:
        """Return a job of the project, or 404 EXPORT_NOT_FOUND."""
        job = self._store.get(project, export_id)
        if job is None:
            raise ExportNotFound(f"Export '{export_id}' not found", {"export_id": export_id})
        return job

    def file_of(self, project: str, export_id: str) -> tuple[ExportJob, Path]:
        """Return a completed job and its file, or 404 EXPORT_NOT_FOUND."""
        job = self.get(project, export_id)
        path = self._file(job)
        if job.status != COMPLETED or not path.exists():
            raise ExportNotFound(
                f"Export '{export_id}' has no file to download (status {job.status})",
                {"export_id": export_id, "status": job.status},
            )
        return job, path

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, sole_runner: bool) -> None:
        """Resume orphaned jobs, expire old files, then keep doing so in the background.

        ``sole_runner``: no other collector can be running exports (the embedded store), so
        every processing job is an orphan of an earlier run of this one.
        """
        self._dir.mkdir(parents=True, exist_ok=True)
        # What :meth:`maintain` does, in one read instead of two or three: a start has no job
        # running yet to touch, and on the embedded store every processing job is resumed.
        now = utc_now_ms()
        stale = None if sole_runner else now - STALE_AFTER
        for job in self._store.left_over(stale, now - self._retention):
            if job.status == PROCESSING:
                logger.info("resuming export %s left unfinished", job.export_id)
                self._start(job)
            else:
                self._expire(job, now)
        self._maintainer = threading.Thread(target=self._maintain_loop, daemon=True)
        self._maintainer.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the maintainer; running exports finish or are resumed at the next start."""
        self._stop.set()
        if self._maintainer is not None:
            self._maintainer.join(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no export runs on this collector (tests, shutdown)."""
        deadline = utc_now_ms() + timedelta(seconds=timeout)
        while utc_now_ms() < deadline:
            with self._lock:
                if not self._running:
                    return True
            self._stop.wait(0.05)
        return False

    def _maintain_loop(self) -> None:
        while not self._stop.wait(HEARTBEAT.total_seconds()):
            try:
                self.maintain()
            except Exception:
                logger.exception("export maintenance failed")

    def maintain(self) -> None:
        """Touch running jobs, resume stale ones, expire files past retention."""
        now = utc_now_ms()
        with self._lock:
            running = list(self._running.values())
        for job in running:
            self._store.save(replace(job, updated_at=now))
        for job in self._store.with_status(PROCESSING, updated_before=now - STALE_AFTER):
            logger.info("resuming export %s left unfinished", job.export_id)
            self._start(job)
        for job in self._store.with_status(COMPLETED, updated_before=now - self._retention):
            self._expire(job, now)

    def _expire(self, job: ExportJob, now: datetime) -> None:
        self._file(job).unlink(missing_ok=True)
        self._store.save(replace(job, status=EXPIRED, updated_at=now))
        logger.info("export %s expired after retention", job.export_id)

    # -- the job -----------------------------------------------------------------------------

    def _start(self, job: ExportJob) -> None:
        with self._lock:
            if job.export_id in self._running:
                return
            self._running[job.export_id] = job
        threading.Thread(target=self._run, args=(job,), name=job.export_id, daemon=True).start()

    def _file(self, job: ExportJob) -> Path:
        """Return a job's file: its name in this collector's export dir.

        Not the stored path itself: a store restored into another data dir (or an export dir
        moved) finds its files where the collector now keeps them.
        """
        return self._dir / Path(job.file_path).name

    def _run(self, job: ExportJob) -> None:
        final = self._file(job)
        partial = final.with_suffix(final.suffix + ".part")
        try:
            partial.unlink(missing_ok=True)
            count = self._store.write_file(
                job.project,
                _job_filters(job, self._store.scores_table),
                job.format,
                job.include_metadata,
                partial,
            )
            os.replace(partial, final)
            done = replace(job, status=COMPLETED, row_count=count, updated_at=utc_now_ms())
            logger.info("export %s completed: %d records", job.export_id, count)
        except Exception as exc:
            logger.exception("export %s failed", job.export_id)
            partial.unlink(missing_ok=True)
            done = replace(job, status=FAILED, error=str(exc)[:2000], updated_at=utc_now_ms())
        try:
            self._store.save(done)
        finally:
            with self._lock:
                self._running.pop(job.export_id, None)


def _filters(body: ExportCreate, scores_table: str = "") -> RequestFilter:
    f = body.filters
    params = [(k, v if isinstance(v, str) else repr(v)) for k, v in f.scores.items()]
    return request_filter(
        prompt_name=f.prompt_name,
        status=f.status,
        model=f.model,
        start_date=f.start_date,
        end_date=f.end_date,
        metadata=f.metadata,
        scores=score_tests(params, field_prefix="filters."),
        scores_table=scores_table,
        field_prefix="filters.",
        kinds=kinds_of(f.kind, field="filters.kind"),
        environments=environments_of(f.environment, field="filters.environment"),
    )


def _job_filters(job: ExportJob, scores_table: str) -> RequestFilter:
    return _filters(ExportCreate(format=job.format, filters=job.filters), scores_table)
