"""Open ClickHouse clients: embedded chDB by ``chdb://`` DSN, or a server by URL."""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver import options
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

logger = logging.getLogger("promptrail.store")

# The driver imports pandas at a process's first insert only to ask whether the rows are a
# DataFrame (0.2-0.8 s of CPU on a loaded machine: every collector start, every CLI command
# that writes). The store passes lists and reads no DataFrame: told pandas is absent, the
# driver never imports it. (Set only if nothing in this process resolved it yet.)
if "pd" not in vars(options):
    options.pd = None
    options.pd_time_test = None

_lock = threading.Lock()

# Server settings of the embedded engine, read once, when it loads in this process. Two merges
# run at a time instead of four (chDB's pool of 2 on 2 cores times ClickHouse's ratio of 2;
# the pool is set too, so that a bigger machine runs two as well): each merge holds a
# hundred MiB or more, and four at once took the collector past its 1 GiB target at full
# ingest. With half the merges under way, ingest also ran faster, the merges catching up
# after it.
#
# Since issue 52.1 the merges run on one thread, two at a time (the executor interleaves their
# steps, so a long merge does not hold back a small one): the journal's 64 MiB inserts leave
# large merges right after a load, and on two threads they took both cores from the reads
# beside them (the list by metadata.user_id right after a 200k load: p95 46-49 ms on two
# threads, 24-35 on one, quiet; the collector's CPU a record the same). One thread merges
# faster than this machine ingests (~30-40 us of merge CPU a record).
#
# BACKUP and RESTORE with the File engine are refused unless the server names where backups may
# go; `promptrail backup DIR` takes any directory the user names. No SQL reaches the embedded
# engine but the collector's own, so the whole file system is allowed.
_ENGINE_OPTIONS = {
    "background_pool_size": "1",
    "background_merges_mutations_concurrency_ratio": "2",
    "backups.allowed_path": "/",
}


class StoreLocked(RuntimeError):
    """The embedded store's data directory is held by another process."""


def open_client(url: str) -> Client:
    """Return a ClickHouse client for ``url``.

    chDB runs one engine per process; several clients on the same path share it, so each
    call returns a client of its own (per-client session state stays separate).
    """
    with _lock:
        try:
            if url.startswith("chdb://"):
                _import_engine_without_arrow()
                with _native_stderr_to_log():
                    return clickhouse_connect.get_client(dsn=url, chdb_options=_ENGINE_OPTIONS)
            return clickhouse_connect.get_client(dsn=url, autogenerate_session_id=False)
        except Exception as exc:
            if url.startswith("chdb://") and _is_lock_error(exc):
                path = url.removeprefix("chdb://")
                raise StoreLocked(
                    f"the embedded store at {path} is in use by another process"
                ) from exc
            raise


def _import_engine_without_arrow() -> None:
    """Load chDB's connection module with pyarrow hidden from it, once per process.

    It imports pyarrow (optional to it) for its Arrow results, which the store never asks
    for: 0.14-0.2 s of every process that opens the embedded store (each ``promptrail``
    command, each collector start). Hidden only while that module loads; if anything in the
    process loaded pyarrow already, nothing is hidden.
    """
    if "chdb.state.sqlitelike" in sys.modules or "pyarrow" in sys.modules:
        return
    sys.modules["pyarrow"] = None  # type: ignore[assignment]
    try:
        importlib.import_module("chdb.state.sqlitelike")
    finally:
        del sys.modules["pyarrow"]


@contextmanager
def _native_stderr_to_log() -> Iterator[None]:
    """Route what the chDB engine writes to file descriptor 2 into the debug log.

    On a held data directory the engine prints its own "Cannot lock file" lines straight to
    the process's stderr before the Python exception arrives; the caller reports the
    failure in one clear line instead.
    """
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace").strip()
            if text:
                logger.debug("chDB engine said: %s", text)


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return "EmbeddedServer" in text or "Code: 36" in text or "lock" in text.lower()


# ClickHouse error codes that say the store is out of reach, overloaded or (its log's tables
# detached) not there: the same query may work later, so the API answers 503, not 500.
_OUTAGE_CODES = frozenset(
    {
        60,  # UNKNOWN_TABLE
        81,  # UNKNOWN_DATABASE
        159,  # TIMEOUT_EXCEEDED
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        203,  # NO_FREE_CONNECTION
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        241,  # MEMORY_LIMIT_EXCEEDED
        242,  # TABLE_IS_READ_ONLY
        252,  # TOO_MANY_PARTS
        279,  # ALL_CONNECTION_TRIES_FAILED
        319,  # UNKNOWN_STATUS_OF_INSERT
        394,  # QUERY_WAS_CANCELLED
        425,  # SYSTEM_ERROR
        999,  # KEEPER_EXCEPTION
    }
)
_CODE = re.compile(r"Code: (\d+)")


def is_store_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the store cannot serve now (retry later), not that a query is wrong."""
    if isinstance(exc, OperationalError):
        return True  # connection refused, reset or timed out
    if not isinstance(exc, DatabaseError):
        return False
    code = getattr(exc, "code", None)
    if not isinstance(code, int):
        found = _CODE.search(str(exc))
        code = int(found.group(1)) if found else None
    return code in _OUTAGE_CODES


def error_summary(exc: BaseException) -> str:
    """The first line of an error (ClickHouse's may carry a stack trace), at most 300 chars."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (chDB may hand back naive ones)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def close_client(client: Any) -> None:
    """Close a client, logging instead of raising (used on shutdown paths)."""
    try:
        client.close()
    except Exception:  # pragma: no cover - best effort on shutdown
        logger.warning("closing the ClickHouse client failed", exc_info=True)
