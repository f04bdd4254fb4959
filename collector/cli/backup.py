"""``promptrail backup DIR`` and ``promptrail restore DIR``: the embedded store and its exports.

promptrail backup DIR [--data-dir DIR]
promptrail restore DIR [--data-dir DIR] [--replace]

A backup goes through the running collector when there is one (the embedded store belongs to
one process; see ``api/routes/admin_backups.py``), else this process opens the store itself.
A restore runs with no collector on the data dir: it replaces what a running one would hold
in memory. Every failure is one line on stderr and exit status 1.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer

from ..config import Settings
from ..runtime_file import RuntimeInfo, read_runtime
from .shared import DataDir, console, fail, group, open_store, settings_for

# The store's modules (and the driver under them) load only when a command needs them:
# `promptrail keys ...` and `--help` start without them (every `promptrail` process pays its
# imports before it runs).
if TYPE_CHECKING:
    from ..services.backups import BackupJob, BackupService

app = group()
_POLL_SECONDS = 0.2
_SERVER_HINT = (
    "promptrail backup and restore work on the embedded store; with a ClickHouse server use "
    "its own BACKUP and RESTORE (docs/deploy.md)"
)


BackupDir = Annotated[Path, typer.Argument(metavar="DIR", help="The backup's directory")]


@app.command()
def backup(directory: BackupDir, data_dir: DataDir = None) -> None:
    """Back up the embedded store and its export files into DIR (new or empty).

    Goes through the running collector when there is one; it keeps serving meanwhile.
    """
    run_backup(settings_for(data_dir), directory)


@app.command()
def restore(
    directory: BackupDir,
    data_dir: DataDir = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a store that already holds data")
    ] = False,
) -> None:
    """Restore a backup made by `promptrail backup` into the embedded store.

    Stop the collector first. The store must hold nothing yet (a new --data-dir), unless
    --replace says to drop what it holds.
    """
    run_restore(settings_for(data_dir), directory, replace)


def run_backup(settings: Settings, directory: Path) -> None:
    """Back up the store of ``settings`` into ``directory`` (new or empty)."""
    if not settings.is_embedded:
        raise fail(_SERVER_HINT)
    directory = directory.expanduser().resolve()
    running = read_runtime(settings.data_dir)
    if running is not None:
        job = _backup_via_collector(running, directory)
    else:
        if not (settings.data_dir / "clickhouse").is_dir():
            raise fail(f"no embedded store in {settings.data_dir.resolve()} to back up")
        with _open_store(settings) as service:
            job = _follow(_local(service, partial(service.start_backup, directory)), "backing up")
    if job.status != "completed":
        raise fail(f"the backup failed: {job.error}")
    print(f"backed up {settings.data_dir.resolve()} to {directory}")
    key_file = settings.data_dir / "connections.key"
    if settings.secret_key is None and key_file.exists():
        # Never copied into a backup (docs/security.md, Connections).
        print(
            f"not backed up: {key_file.resolve()}, the key of the provider connections' "
            "secrets; keep a copy of it apart: restoring the connections needs it",
            file=sys.stderr,
        )


def run_restore(settings: Settings, directory: Path, replace: bool) -> None:
    """Restore the backup at ``directory`` into the store of ``settings``."""
    from ..errors import ContractError
    from ..services.backups import read_manifest

    if not settings.is_embedded:
        raise fail(_SERVER_HINT)
    directory = directory.expanduser().resolve()
    running = read_runtime(settings.data_dir)
    if running is not None:
        raise fail(
            f"a collector is running on {settings.data_dir.resolve()} (pid {running.pid}): "
            "stop it, then restore"
        )
    try:
        manifest = read_manifest(directory)
    except ContractError as exc:
        raise fail(exc.message) from None
    with _open_store(settings) as service:
        job = _follow(
            _local(service, partial(service.start_restore, directory, replace)), "restoring"
        )
    if job.status != "completed":
        raise fail(f"the restore failed: {job.error} (run it again with --replace)")
    print(
        f"restored {settings.data_dir.resolve()} from {directory} "
        f"(backup of {manifest.created_at}, promptrail {manifest.promptrail_version})"
    )


@contextmanager
def _open_store(settings: Settings) -> Iterator[BackupService]:
    from ..services.backups import BackupService
    from ..store.audit import AuditStore

    with open_store(settings) as store:
        # The audit entries a killed collector left in its journal: applied (opening does it)
        # before a backup copies the store, or before a restore replaces it (replayed after,
        # they would follow a chain they are not part of).
        AuditStore(store.client, store.database, store.cluster, settings.store_url).close()
        yield BackupService(store.backups, settings.exports_path, store.is_embedded)


def _local(service: BackupService, start: Callable[[], BackupJob]) -> Callable[[], BackupJob]:
    """Start a job of this process and return how to read its state."""
    from ..errors import ContractError

    try:
        job_id = start().job_id
    except ContractError as exc:
        raise fail(exc.message) from None
    return lambda: service.job(job_id)


def _backup_via_collector(running: RuntimeInfo, directory: Path) -> BackupJob:
    headers = {"X-Promptrail-Admin": running.admin_token}
    with httpx.Client(base_url=running.url, headers=headers, timeout=30) as client:
        started = _call(client, running, "POST", "/v1/admin/backups", {"directory": str(directory)})
        path = f"/v1/admin/backups/{started['job_id']}"
        return _follow(lambda: _job(_call(client, running, "GET", path)), "backing up")


def _call(
    client: httpx.Client,
    running: RuntimeInfo,
    method: str,
    path: str,
    body: dict[str, str] | None = None,
) -> dict[str, Any]:
    try:
        response = client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise fail(f"the collector at {running.url} did not answer: {exc}") from None
    if response.is_error:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"the collector answered {response.status_code}: {response.text[:200]}"
        raise fail(str(message))
    data: dict[str, Any] = response.json()["data"]
    return data


def _job(data: dict[str, Any]) -> BackupJob:
    from ..services.backups import BackupJob

    return BackupJob(
        job_id=data["job_id"],
        kind="backup",
        directory=data["directory"],
        status=data["status"],
        error=data["error"] or "",
        total_bytes=data["total_bytes"],
        done_bytes=data["done_bytes"],
    )


def _follow(poll: Callable[[], BackupJob], label: str) -> BackupJob:
    """Show a job's progress (bytes copied of the backup's size) until it ends."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from ..services.backups import RUNNING

    columns = (
        SpinnerColumn(),
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=None)
        while True:
            job = poll()
            progress.update(task, total=job.total_bytes or None, completed=job.done_bytes)
            if job.status != RUNNING:
                return job
            time.sleep(_POLL_SECONDS)
