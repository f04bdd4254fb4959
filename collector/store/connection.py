"""Open ClickHouse clients: embedded chDB by ``chdb://`` DSN, or a server by URL."""

from __future__ import annotations

import logging
import threading
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.client import Client

logger = logging.getLogger("promptrail.store")

_lock = threading.Lock()


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
                return clickhouse_connect.get_client(dsn=url)
            return clickhouse_connect.get_client(dsn=url, autogenerate_session_id=False)
        except Exception as exc:
            if url.startswith("chdb://") and _is_lock_error(exc):
                path = url.removeprefix("chdb://")
                raise StoreLocked(
                    f"the embedded store at {path} is in use by another process"
                ) from exc
            raise


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return "EmbeddedServer" in text or "Code: 36" in text or "lock" in text.lower()


def close_client(client: Any) -> None:
    """Close a client, logging instead of raising (used on shutdown paths)."""
    try:
        client.close()
    except Exception:  # pragma: no cover - best effort on shutdown
        logger.warning("closing the ClickHouse client failed", exc_info=True)
