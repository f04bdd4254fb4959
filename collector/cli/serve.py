"""``promptrail``: run the collector and manage API keys.

promptrail serve [--host H] [--port P] [--data-dir DIR]
promptrail keys create --project NAME
promptrail keys list [--project NAME] [--all] [--json]
promptrail keys revoke KEY_ID_OR_KEY
promptrail keys rotate --project NAME [--grace SECONDS]
promptrail backup DIR [--data-dir DIR]
promptrail restore DIR [--data-dir DIR] [--replace]
promptrail stub-provider [--host H] [--port P]
promptrail --version
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from promptrail import __version__

from .config import Settings
from .runtime_file import RuntimeInfo, new_admin_token, read_runtime, remove_runtime, write_runtime

if TYPE_CHECKING:
    from .store.table_groups import Store

# Plain help (click's layout): typer's rich panels print a type after every flag, even
# "--help <bool>". Options that take a value name it in capitals (--port PORT).
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="promptrail collector: a prompt registry and LLM request log.",
)
keys_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Manage API keys.")
app.add_typer(keys_app, name="keys")
console = Console(stderr=True, soft_wrap=True)

DEFAULT_DATA_DIR = Settings.model_fields["data_dir"].default

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", metavar="DIR", help="Embedded store and export files [./data]"),
]


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


def _settings(data_dir: Path | None, **overrides: object) -> Settings:
    values: dict[str, object] = {k: v for k, v in overrides.items() if v is not None}
    if data_dir is not None:
        values["data_dir"] = data_dir
    return Settings(**values)  # type: ignore[arg-type]


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=1)


def first_line(exc: Exception) -> str:
    """Return the first line of an error's message (a store's can run to a stack trace)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


@contextlib.contextmanager
def open_store(settings: Settings) -> Iterator[Store]:
    """Open the store for a command that works on it itself; failing to is one line."""
    from .store.connection import StoreLocked
    from .store.table_groups import Store

    # The driver logs a failed connection on its own too (Python's last-resort handler prints
    # it): the one line below says it already.
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    try:
        store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    except StoreLocked as exc:
        raise _fail(f"{exc} (no running collector found to ask)") from None
    except Exception as exc:
        raise _fail(f"cannot open the store {settings.store_url}: {first_line(exc)}") from None
    try:
        yield store
    finally:
        store.close()


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(metavar="HOST", help="Interface to bind [127.0.0.1]")
    ] = None,
    port: Annotated[
        int | None, typer.Option(metavar="PORT", help="Port, 0 for any free one [8000]")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Start the collector.

    Ctrl-C or SIGTERM stops it after in-flight requests finish.
    """
    import uvicorn

    from .access_log import redact_access_log
    from .app import create_app, open_services
    from .store.connection import StoreLocked
    from .tuning import tune_for_ingest

    settings = _settings(data_dir, host=host, port=port)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    redact_access_log()
    if settings.is_embedded and read_runtime(settings.data_dir) is not None:
        raise _fail(f"a collector is already running on {settings.data_dir.resolve()}")
    # The port first: a port in use must fail before a one-time key is made and shown (it
    # would be lost), and the banner must not say "listening" before it is true.
    listener = _listen(settings.host, settings.port, " (no key was made)")
    port = listener.getsockname()[1]
    base_url = f"http://{_url_host(settings.host)}:{port}"
    token = new_admin_token()

    def on_ready(services: object, new_key: str | None) -> None:
        if settings.is_embedded:
            write_runtime(settings.data_dir, RuntimeInfo(base_url, os.getpid(), token))
        _print_banner(settings, base_url, new_key)

    tune_for_ingest()
    try:
        opened = open_services(settings)
    except StoreLocked as exc:
        listener.close()
        raise _fail(f"{exc}; stop the other process or pass --data-dir") from None
    except Exception as exc:
        listener.close()
        raise _fail(f"cannot open the store {settings.store_url}: {exc}") from None
    application = create_app(settings, on_ready=on_ready, opened=opened)
    application.state.admin_token = token
    config = uvicorn.Config(
        application, host=settings.host, port=port, timeout_graceful_shutdown=30
    )
    # uvicorn drains in-flight requests on SIGTERM, runs the lifespan shutdown (the store
    # closes), then re-raises the signal: make that last step a clean exit, status 0.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        remove_runtime(settings.data_dir, os.getpid())


def _listen(host: str, port: int, note: str = "") -> socket.socket:
    """Bind and listen on ``host:port`` now; connections wait in the backlog until served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        # create_server's own message repeats the address: the errno's text reads better.
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise _fail(
            f"cannot listen on {host}:{port}: {reason.lower()}; stop what uses it or pass "
            f"--port{note}"
        ) from None


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# What a client needs to reach the stub: the base URLs as the providers' SDKs read them, and a
# key (the stub accepts any; the openai SDK refuses to start without one).
STUB_KEYS = {"OPENAI_API_KEY": "sk-stub", "ANTHROPIC_API_KEY": "sk-ant-stub"}


def stub_environment(base_url: str) -> dict[str, str]:
    """Return the variables that point the OpenAI and Anthropic SDKs at a stub provider."""
    return {
        "OPENAI_BASE_URL": f"{base_url}/v1",
        "OPENAI_API_KEY": STUB_KEYS["OPENAI_API_KEY"],
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": STUB_KEYS["ANTHROPIC_API_KEY"],
    }


@app.command("stub-provider")
def stub_provider(
    host: Annotated[str, typer.Option(metavar="HOST", help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port, 0 for any free one")] = 8100,
) -> None:
    """Serve a local stand-in for OpenAI and Anthropic, for examples and demos.

    It speaks both wire formats (chat completions and messages, whole or streamed), answers
    every call with the same short reply, counts words as tokens and accepts any key. It prints
    the variables to export, for the examples and for a collector's runs. Not a model: for
    trying promptrail without provider access.
    """
    import uvicorn

    from .stub_provider import AnthropicStub, OpenAIStub, both

    listener = _listen(host, port)
    base_url = f"http://{_url_host(host)}:{listener.getsockname()[1]}"
    print(f"promptrail stub provider (OpenAI and Anthropic wire formats) on {base_url}")
    print("point the examples and the collector at it with:")
    for name, value in stub_environment(base_url).items():
        print(f"export {name}={value}")
    sys.stdout.flush()
    config = uvicorn.Config(both(OpenAIStub(), AnthropicStub()), log_level="warning")
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.Server(config).run(sockets=[listener])


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _print_banner(settings: Settings, base_url: str, new_key: str | None) -> None:
    out = Console(soft_wrap=True)  # no line breaks inside a key or a command to copy
    out.print(f"\n[bold]promptrail collector[/bold] listening on {base_url}")
    out.print(f"  store: {settings.store_url} (database {settings.database})")
    out.print(f"  console: {base_url} (sign in with an API key)")
    out.print(f"  API docs: {base_url}/docs")
    if new_key:
        out.print(
            f"  development API key for project 'default' (shown once): [bold]{new_key}[/bold]"
        )
    elif settings.init_api_key:
        out.print("  API key: the one in PROMPTRAIL_INIT_API_KEY (project 'default')")
    keys = f"{_this_command()} keys create --project NAME"
    if settings.data_dir != DEFAULT_DATA_DIR:
        keys += f" --data-dir {shlex.quote(str(settings.data_dir))}"
    out.print(f"  new API key: {keys}", highlight=False, markup=False)
    key = new_key or "$PROMPTRAIL_API_KEY"
    out.print(f"  try: curl -s -H 'Authorization: Bearer {key}' {base_url}/v1/prompts\n")


def _this_command() -> str:
    """Return this console script as a user types it from the current directory.

    A fresh clone has ``promptrail`` in ``.venv/bin``, not on PATH: the banner names the path.
    """
    script = Path(sys.argv[0])
    if script.name != "promptrail":
        script = Path(sys.executable).parent / "promptrail"
    found = shutil.which("promptrail")
    if found and Path(found).resolve() == script.resolve():
        return "promptrail"
    # abspath, not resolve: a .venv that is a symlink stays .venv/bin/promptrail.
    absolute = Path(os.path.abspath(script))
    with contextlib.suppress(ValueError):
        relative = absolute.relative_to(os.getcwd())
        return shlex.quote(str(relative) if len(relative.parts) > 1 else f"./{relative}")
    return shlex.quote(str(absolute))


BackupDir = Annotated[Path, typer.Argument(metavar="DIR", help="The backup's directory")]


@app.command()
def backup(directory: BackupDir, data_dir: DataDir = None) -> None:
    """Back up the embedded store and its export files into DIR (new or empty).

    Goes through the running collector when there is one; it keeps serving meanwhile.
    """
    from .cli_backup import run_backup

    run_backup(_settings(data_dir), directory)


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
    from .cli_backup import run_restore

    run_restore(_settings(data_dir), directory, replace)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)


# The keys commands (create, list, revoke, rotate) register themselves on keys_app.
from . import cli_keys  # noqa: E402, F401
