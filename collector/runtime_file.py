"""The running collector's runtime file (``<data dir>/collector.json``).

It tells ``promptrail keys create`` where the collector that holds the embedded store
listens, and the admin token that lets it ask for a key.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

FILE_NAME = "collector.json"


@dataclass(frozen=True)
class RuntimeInfo:
    """Where a running collector listens and how to ask it for keys."""

    url: str
    pid: int
    admin_token: str


def runtime_path(data_dir: Path) -> Path:
    """Return the runtime file's path."""
    return data_dir / FILE_NAME


def new_admin_token() -> str:
    """Return a fresh admin token."""
    return secrets.token_urlsafe(32)


def write_runtime(data_dir: Path, info: RuntimeInfo) -> None:
    """Write the runtime file, readable by its owner only."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = runtime_path(data_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(info), handle)


def read_runtime(data_dir: Path) -> RuntimeInfo | None:
    """Return the runtime info of a live collector on this data dir, or None."""
    try:
        info = RuntimeInfo(**json.loads(runtime_path(data_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    try:
        os.kill(info.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return info


def remove_runtime(data_dir: Path, pid: int) -> None:
    """Remove the runtime file if it is this process's."""
    info = read_runtime(data_dir)
    if info is not None and info.pid == pid:
        runtime_path(data_dir).unlink(missing_ok=True)
