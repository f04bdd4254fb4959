"""``promptrail serve``: start the collector, print where to reach it and a first key."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..config import Settings
from ..runtime_file import RuntimeInfo, new_admin_token, read_runtime, remove_runtime, write_runtime
from .shared import DataDir, exit_cleanly, fail, group, listen, settings_for, url_host

app = group()
DEFAULT_DATA_DIR = Settings.model_fields["data_dir"].default


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

    from ..access_log import redact_access_log
    from ..app import create_app, open_services
    from ..store.connection import StoreLocked
    from ..tuning import tune_for_ingest

    settings = settings_for(data_dir, host=host, port=port)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    redact_access_log()
    if settings.is_embedded and read_runtime(settings.data_dir) is not None:
        raise fail(f"a collector is already running on {settings.data_dir.resolve()}")
    # The port first: a port in use must fail before a one-time key is made and shown (it
    # would be lost), and the banner must not say "listening" before it is true.
    listener = listen(settings.host, settings.port, " (no key was made)")
    port = listener.getsockname()[1]
    base_url = f"http://{url_host(settings.host)}:{port}"
    token = new_admin_token()

    def on_ready(services: object, new_key: str | None) -> None:
        if settings.is_embedded:
            write_runtime(settings.data_dir, RuntimeInfo(base_url, os.getpid(), token))
        keys = getattr(getattr(services, "connections", None), "keys", None)
        _print_banner(settings, base_url, new_key, keys.origin if keys is not None else None)

    tune_for_ingest()
    try:
        opened = open_services(settings)
    except StoreLocked as exc:
        listener.close()
        raise fail(f"{exc}; stop the other process or pass --data-dir") from None
    except Exception as exc:
        listener.close()
        raise fail(f"cannot open the store {settings.store_url}: {exc}") from None
    application = create_app(settings, on_ready=on_ready, opened=opened)
    application.state.admin_token = token
    config = uvicorn.Config(
        application, host=settings.host, port=port, timeout_graceful_shutdown=30
    )
    # uvicorn drains in-flight requests on SIGTERM, runs the lifespan shutdown (the store
    # closes), then re-raises the signal: make that last step a clean exit, status 0.
    signal.signal(signal.SIGTERM, exit_cleanly)
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        remove_runtime(settings.data_dir, os.getpid())


def _print_banner(
    settings: Settings, base_url: str, new_key: str | None, secret_key: str | None = None
) -> None:
    out = Console(soft_wrap=True)  # no line breaks inside a key or a command to copy
    out.print(f"\n[bold]promptrail collector[/bold] listening on {base_url}")
    out.print(f"  store: {settings.store_url} (database {settings.database})")
    out.print(f"  console: {base_url} (sign in with an API key)")
    out.print(f"  API docs: {base_url}/docs")
    if new_key:
        out.print(
            "  development API key for project 'default', with every scope (shown once): "
            f"[bold]{new_key}[/bold]"
        )
    elif settings.init_api_key:
        out.print("  API key: the one in PROMPTRAIL_INIT_API_KEY (project 'default')")
    keys = f"{_this_command()} keys create --project NAME"
    if settings.data_dir != DEFAULT_DATA_DIR:
        keys += f" --data-dir {shlex.quote(str(settings.data_dir))}"
    out.print(f"  new API key: {keys}", highlight=False, markup=False)
    if secret_key is not None:
        # Where the key sealing the provider connections' secrets is (docs/security.md).
        out.print(f"  connections' secret key: {secret_key}", highlight=False, markup=False)
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
