"""What the SDK keeps on disk, whatever it is: where (the cache directory), made private,
written whole.

The disk spool (``_capture/spool.py``) and the templates' last good copies (``_templates.py``)
both live under the cache directory: ``init(cache_dir=...)``, else ``PROMPTRAIL_CACHE_DIR``,
else the user's cache directory + ``/promptrail`` (docs/sdk.md, "Outages");
``PROMPTRAIL_DISK_CACHE=0`` keeps everything in memory. Under it each collector URL and API
key has a part of its own, named by a hash of both (:func:`scope_of`), so no key is written
to disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from pathlib import Path

from ._settings import current, default_cache_dir

logger = logging.getLogger("promptrail")

_configured: list[str | os.PathLike[str] | None] = [None]


def remember_cache_dir(cache_dir: str | os.PathLike[str] | None) -> None:
    """``init(cache_dir=...)``: the directory clients made later keep templates in too."""
    _configured[0] = cache_dir


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The directory the SDK keeps things in, or None when the disk cache is turned off.

    ``cache_dir`` beats ``init(cache_dir=...)``, which beats ``PROMPTRAIL_CACHE_DIR``, which
    beats the default; ``PROMPTRAIL_DISK_CACHE=0`` turns it off whatever the directory.
    """
    settings = current()
    if not settings.disk_cache:
        return None
    if cache_dir is None:
        cache_dir = _configured[0]
    if cache_dir is None:
        cache_dir = settings.cache_dir or default_cache_dir()
    return Path(cache_dir).expanduser()


_unusable: set[tuple[str, str]] = set()


def say_unusable(cache_dir: Path, error: OSError, what: str, instead: str) -> None:
    """Warn, once per process and directory, that ``what`` cannot be kept on disk there."""
    key = (what, str(cache_dir))
    if key in _unusable:
        return
    _unusable.add(key)
    logger.warning(
        "promptrail: cannot keep %s on disk at %s (%s); %s",
        what,
        cache_dir,
        error.strerror or error,
        instead,
    )


def scope_of(base_url: str, api_key: str) -> str:
    """The name of one collector URL and key's part of the cache (the key is not on disk)."""
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{api_key}".encode()).hexdigest()[:32]


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) readable by this user only; raise OSError if it
    cannot be created or written.

    Only directories made here are set to 0700: an existing one (``cache_dir="/tmp"``, say)
    keeps its mode, while everything made inside it is private. Also proves the directory
    writable (a read-only mount must fail here, not at the first spill, so the fallback to
    memory is decided once, at start).
    """
    missing: list[Path] = []
    parent = path
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        # One by one: mkdir(parents=True) gives parents the umask's mode, not 0700.
        directory.mkdir(mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    probe = path / f".probe-{os.getpid()}-{threading.get_ident()}"
    probe.write_bytes(b"")
    probe.unlink()
    return path


def write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a hidden temporary file renamed into place."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
