"""The ``promptrail`` command: its ``--version`` and its command groups, attached in help order.

promptrail serve [--host H] [--port P] [--data-dir DIR]
promptrail stub-provider [--host H] [--port P] [--replies FILE] [--fixed]
promptrail backup DIR [--data-dir DIR]
promptrail restore DIR [--data-dir DIR] [--replace]
promptrail keys create | list | revoke | rotate
promptrail users create --email E --password-stdin [--instance-admin]
promptrail audit verify [--data-dir DIR]
promptrail --version

Each group is a module of this package importing only ``shared.py``; only this module knows them
all. A group attached without a name adds its commands at the top level (serve, backup, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import Annotated, NoReturn

import typer

from promptrail import __version__

from . import audit, backup, keys, serve, stub, users
from .shared import group

app = group("promptrail collector: a prompt registry and LLM request log.")
app.add_typer(serve.app)
app.add_typer(stub.app)
app.add_typer(backup.app)
app.add_typer(keys.app, name="keys")
app.add_typer(users.app, name="users")
app.add_typer(audit.app, name="audit")


def _print_version(value: bool) -> None:
    if value:
        print(f"promptrail {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """promptrail collector: a prompt registry and LLM request log."""


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        _exit_now(130)
    except SystemExit as exc:
        _exit_now(exc.code)
    _exit_now(0)


def _exit_now(code: int | str | None) -> NoReturn:
    """Exit with ``code`` once the command is done, skipping the interpreter's teardown.

    Tearing down a process that loaded the store (chDB, pyarrow, pydantic: ~800 modules) took
    0.2-0.3 s of CPU after the last exit handler, with nothing left to write: the store is
    closed by then and each insert was on disk when it returned. The exit handlers still run
    (logging's flush, the SDK's), then the standard streams are flushed. A command that left a
    thread of its own running exits the ordinary way, which waits for it.
    """
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    if isinstance(code, str):
        print(code, file=sys.stderr)  # what sys.exit does with a message
        code = 1
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe or stream: nothing more to say on it.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)
