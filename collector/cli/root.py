"""The ``promptrail`` command: its ``--version`` and its command groups, attached in help order.

promptrail serve [--host H] [--port P] [--data-dir DIR]
promptrail stub-provider [--host H] [--port P]
promptrail backup DIR [--data-dir DIR]
promptrail restore DIR [--data-dir DIR] [--replace]
promptrail keys create | list | revoke | rotate
promptrail --version

Each group is a module of this package importing only ``shared.py``; only this module knows them
all. A group attached without a name adds its commands at the top level (serve, backup, ...).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from promptrail import __version__

from . import backup, keys, serve, stub
from .shared import group

app = group("promptrail collector: a prompt registry and LLM request log.")
app.add_typer(serve.app)
app.add_typer(stub.app)
app.add_typer(backup.app)
app.add_typer(keys.app, name="keys")


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
        sys.exit(130)
