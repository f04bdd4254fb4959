"""What every ``promptrail`` command uses: its error line, its settings, the store, a listener,
the running collector's admin routes.

Each command group (``serve.py``, ``keys.py``, ``backup.py``, ``stub.py``) imports this module
and nothing of the others; the package's ``root.py`` attaches the groups to one app.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer
from rich.console import Console

from ..config import Settings

if TYPE_CHECKING:
    from ..runtime_file import RuntimeInfo
    from ..store.database import Store

# Where commands write their messages and errors: stdout stays for what a script reads (a key,
# JSON, the stub's exports).
console = Console(stderr=True, soft_wrap=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", metavar="DIR", help="Embedded store and export files [./data]"),
]


def group(help: str | None = None) -> typer.Typer:
    """Return a command group in the CLI's plain layout, to attach with ``add_typer``.

    Plain help (click's layout): typer's rich panels print a type after every flag, even
    "--help <bool>". Options that take a value name it in capitals (--port PORT).
    """
    return typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, help=help)


def settings_for(data_dir: Path | None, **overrides: object) -> Settings:
    """Return the collector's settings (environment, .env) with the command's options over them."""
    values: dict[str, object] = {k: v for k, v in overrides.items() if v is not None}
    if data_dir is not None:
        values["data_dir"] = data_dir
    return Settings(**values)  # type: ignore[arg-type]


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr and return the exit (status 1) to raise."""
    console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code=1)


def first_line(exc: Exception) -> str:
    """Return the first line of an error's message (a store's can run to a stack trace)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


@contextlib.contextmanager
def open_store(settings: Settings) -> Iterator[Store]:
    """Open the store for a command that works on it itself; failing to is one line."""
    from ..store.connection import StoreLocked
    from ..store.database import Store

    # The driver logs a failed connection on its own too (Python's last-resort handler prints
    # it): the one line below says it already.
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    try:
        store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    except StoreLocked as exc:
        raise fail(f"{exc} (no running collector found to ask)") from None
    except Exception as exc:
        raise fail(f"cannot open the store {settings.store_url}: {first_line(exc)}") from None
    try:
        yield store
    finally:
        store.close()


def listen(host: str, port: int, note: str = "") -> socket.socket:
    """Bind and listen on ``host:port`` now; connections wait in the backlog until served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        # create_server's own message repeats the address: the errno's text reads better.
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise fail(
            f"cannot listen on {host}:{port}: {reason.lower()}; stop what uses it or pass "
            f"--port{note}"
        ) from None


def url_host(host: str) -> str:
    """Return ``host`` as it goes in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def exit_cleanly(signum: int, frame: object) -> None:
    """A SIGTERM handler: uvicorn re-raises the signal after its shutdown; exit with status 0."""
    raise SystemExit(0)


def admin_call(
    running: RuntimeInfo,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    timeout: float = 30,
) -> Any:
    """Return ``data`` of the running collector's admin route ``method`` ``/v1/admin<path>``
    (the runtime file's admin token); its error's message, or its status, fails the command."""
    try:
        response = httpx.request(
            method,
            f"{running.url}/v1/admin{path}",
            json=body,
            params=params,
            headers={"X-Promptrail-Admin": running.admin_token},
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        raise fail(f"the collector at {running.url} did not answer: {exc}") from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.is_error or not isinstance(answer, dict) or "data" not in answer:
        error = answer.get("error") if isinstance(answer, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        raise fail(message or f"the collector answered {response.status_code}")
    return answer["data"]
