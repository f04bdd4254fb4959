"""``promptrail``: run the collector and manage API keys.

promptrail serve [--host H] [--port P] [--data-dir DIR]
promptrail keys create --project NAME
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console

from .config import Settings
from .runtime import RuntimeInfo, new_admin_token, read_runtime, remove_runtime, write_runtime

app = typer.Typer(add_completion=False, no_args_is_help=True, help="promptrail collector")
keys_app = typer.Typer(no_args_is_help=True, help="Manage API keys")
app.add_typer(keys_app, name="keys")
console = Console(stderr=True, soft_wrap=True)

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Embedded store and export files [./data]")
]


def _settings(data_dir: Path | None, **overrides: object) -> Settings:
    values: dict[str, object] = {k: v for k, v in overrides.items() if v is not None}
    if data_dir is not None:
        values["data_dir"] = data_dir
    return Settings(**values)  # type: ignore[arg-type]


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=1)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind [127.0.0.1]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [8000]")] = None,
    data_dir: DataDir = None,
) -> None:
    """Start the collector (Ctrl-C or SIGTERM stops it after in-flight requests finish)."""
    import uvicorn

    from .app import create_app, open_services
    from .store.connection import StoreLocked
    from .tuning import tune_for_ingest

    settings = _settings(data_dir, host=host, port=port)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if settings.is_embedded and read_runtime(settings.data_dir) is not None:
        raise _fail(f"a collector is already running on {settings.data_dir.resolve()}")
    base_url = f"http://{settings.host}:{settings.port}"
    token = new_admin_token()

    def on_ready(services: object, new_key: str | None) -> None:
        if settings.is_embedded:
            write_runtime(settings.data_dir, RuntimeInfo(base_url, os.getpid(), token))
        _print_banner(settings, base_url, new_key)

    tune_for_ingest()
    try:
        opened = open_services(settings)
    except StoreLocked as exc:
        raise _fail(f"{exc}; stop the other process or pass --data-dir") from None
    except Exception as exc:
        raise _fail(f"cannot open the store {settings.store_url}: {exc}") from None
    application = create_app(settings, on_ready=on_ready, opened=opened)
    application.state.admin_token = token
    config = uvicorn.Config(
        application, host=settings.host, port=settings.port, timeout_graceful_shutdown=30
    )
    # uvicorn drains in-flight requests on SIGTERM, runs the lifespan shutdown (the store
    # closes), then re-raises the signal: make that last step a clean exit, status 0.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        uvicorn.Server(config).run()
    finally:
        remove_runtime(settings.data_dir, os.getpid())


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _print_banner(settings: Settings, base_url: str, new_key: str | None) -> None:
    out = Console()
    out.print(f"\n[bold]promptrail collector[/bold] listening on {base_url}")
    out.print(f"  store: {settings.store_url} (database {settings.database})")
    out.print(f"  API docs: {base_url}/docs")
    if new_key:
        out.print(
            f"  development API key for project 'default' (shown once): [bold]{new_key}[/bold]"
        )
    elif settings.init_api_key:
        out.print("  API key: the one in PROMPTRAIL_INIT_API_KEY (project 'default')")
    else:
        out.print("  new API key: promptrail keys create --project default")
    key = new_key or "$PROMPTRAIL_API_KEY"
    out.print(
        f"  try: curl -s -H 'Authorization: Bearer {key}' {base_url}/v1/prompts\n",
        soft_wrap=True,
    )


@keys_app.command("create")
def create_key(
    project: Annotated[str, typer.Option(help="Project the key belongs to")],
    data_dir: DataDir = None,
) -> None:
    """Create an API key and print it once (it is stored hashed)."""
    settings = _settings(data_dir)
    running = read_runtime(settings.data_dir) if settings.is_embedded else None
    key = _create_via_collector(running, project) if running else _create_direct(settings, project)
    console.print(f"API key for project '{project}' (shown once, stored hashed):")
    print(key)


def _create_via_collector(running: RuntimeInfo, project: str) -> str:
    try:
        response = httpx.post(
            f"{running.url}/v1/admin/keys",
            json={"project": project},
            headers={"X-Promptrail-Admin": running.admin_token},
            timeout=30,
        )
    except httpx.HTTPError as exc:
        raise _fail(f"the collector at {running.url} did not answer: {exc}") from None
    if response.status_code != 201:
        raise _fail(response.json().get("error", {}).get("message", response.text))
    return str(response.json()["data"]["api_key"])


def _create_direct(settings: Settings, project: str) -> str:
    from .errors import PromptrailError
    from .services.keys import KeyService
    from .store.connection import StoreLocked
    from .store.store import Store

    try:
        store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    except StoreLocked as exc:
        raise _fail(f"{exc} (no running collector found to ask)") from None
    try:
        return KeyService(store.keys).create(project)
    except PromptrailError as exc:
        raise _fail(exc.message) from None
    finally:
        store.close()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
