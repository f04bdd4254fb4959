"""``promptrail keys create | list | revoke | rotate``.

promptrail keys create --project NAME [--scopes ingest,prompts:read] [--expires-in 90d] [--name N]
promptrail keys list [--project NAME] [--all] [--json]
promptrail keys revoke KEY_ID_OR_KEY
promptrail keys rotate --project NAME [--grace SECONDS] [--json]

Each goes through the collector running on the data dir (its loopback admin routes, with the
admin token of its runtime file) when there is one: the embedded store belongs to that process.
Otherwise it opens the store itself (a ClickHouse server: always). Any failure is one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..access.principal import SCOPES
from ..config import Settings
from ..errors import plain_message
from ..models.keys import (
    MAX_GRACE_SECONDS,
    KeyCreate,
    KeyCreated,
    KeyCreatedData,
    KeyData,
    KeyList,
    KeyOut,
    KeyRotated,
    KeyRotatedData,
    parse_duration,
)
from ..runtime_file import read_runtime
from .shared import (
    DataDir,
    admin_call,
    console,
    fail,
    first_line,
    group,
    open_store,
    settings_for,
)

# The key service and the store under it load only when a command opens the store itself: a
# command that goes through the running collector starts without them.
if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..services.keys import KeyService

# Attached to the root app as ``keys`` (root.py).
app = group("Manage API keys.")

Project = Annotated[str, typer.Option(metavar="NAME", help="Project the key belongs to")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of a table")]


@app.command("create")
def create_key(
    project: Project,
    scopes: Annotated[
        str | None,
        typer.Option(
            metavar="SCOPES",
            help="What the key may do, comma-separated: ingest, prompts:read, read, write, "
            "admin (docs/api-notes.md, 'Keys and scopes') [default: every scope]",
        ),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(metavar="DURATION", help="Expire after 90d, 12h, 30m or 45s [default: never]"),
    ] = None,
    name: Annotated[str | None, typer.Option(metavar="NAME", help="A name to tell it by")] = None,
    data_dir: DataDir = None,
) -> None:
    """Create an API key and print it once (it is stored hashed)."""
    body = _create_body(project, scopes, expires_in, name)
    data = _admin(
        settings_for(data_dir),
        "POST",
        "/keys",
        lambda keys: KeyCreatedData(data=_created(keys, body)),
        body=body.model_dump(mode="json", exclude_none=True),
    )
    shown = ", ".join(data.get("scopes") or SCOPES)
    every = " (every scope)" if set(data.get("scopes") or SCOPES) == set(SCOPES) else ""
    expiry = f", expires {_time(data['expires_at'])}" if data.get("expires_at") else ""
    console.print(
        f"API key {data.get('key_id') or ''} for project '{project}', scopes {shown}{every}"
        f"{expiry} (shown once, stored hashed):",
        highlight=False,
        markup=False,
    )
    print(data["api_key"])


def _created(keys: KeyService, body: KeyCreate) -> KeyCreated:
    from ..services.keys import created_key

    return created_key(keys, body)


def _create_body(
    project: str, scopes: str | None, expires_in: str | None, name: str | None
) -> KeyCreate:
    """The admin route's body, or one line saying what is wrong with an option."""
    try:
        seconds = None if expires_in is None else parse_duration(expires_in)
    except ValueError as exc:
        raise fail(f"--expires-in: {exc}") from None
    try:
        return KeyCreate(
            project=project,
            scopes=None if scopes is None else [s.strip() for s in scopes.split(",") if s.strip()],
            expires_in=seconds,
            name=name,
        )
    except ValueError as exc:  # a pydantic ValidationError is one
        errors = getattr(exc, "errors", None)
        message = str(exc) if errors is None else "; ".join(_option_error(e) for e in errors())
        raise fail(message) from None


def _option_error(error: Any) -> str:
    field = ".".join(str(p) for p in error.get("loc", ())) or "option"
    if field.startswith("scopes"):
        return f"--scopes: each scope is one of {', '.join(SCOPES)}"
    return f"--{field.replace('_', '-')}: {plain_message(str(error.get('msg', '')))}"


@app.command("list")
def list_keys(
    project: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only this project's keys")
    ] = None,
    include_revoked: Annotated[bool, typer.Option("--all", help="Show revoked keys too")] = False,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """List API keys: project, key id, prefix, created, last used, status; never a key."""
    data = _admin(
        settings_for(data_dir),
        "GET",
        "/keys",
        lambda keys: KeyList(
            data=[KeyOut.model_validate(info) for info in keys.list_keys(project, include_revoked)]
        ),
        params={"project": project or "", "include_revoked": include_revoked},
    )
    if as_json:
        print(json.dumps(data, indent=2))
    elif not data:
        console.print("no API keys" + (f" in project '{project}'" if project else ""))
    else:
        _print_keys(data)


@app.command("revoke")
def revoke_key(
    key: Annotated[str, typer.Argument(metavar="KEY_ID_OR_KEY", help="A key id (key_…) or a key")],
    data_dir: DataDir = None,
) -> None:
    """Revoke an API key: refused from the next request on, by every collector of the store."""
    data = _admin(
        settings_for(data_dir),
        "POST",
        "/keys/revoke",
        lambda keys: KeyData(data=KeyOut.model_validate(keys.revoke(key))),
        body={"key": key},
    )
    console.print(f"revoked {data['key_id']} ({data['prefix']}…) of project '{data['project']}'")


@app.command("rotate")
def rotate_keys(
    project: Project,
    grace: Annotated[
        int,
        typer.Option(
            metavar="SECONDS",
            min=0,
            max=MAX_GRACE_SECONDS,
            help="How long the project's old keys keep working [0: revoked at once]",
        ),
    ] = 0,
    as_json: AsJson = False,
    data_dir: DataDir = None,
) -> None:
    """Make a new API key for a project (printed once) and revoke its other keys.

    The old keys keep working for --grace seconds, long enough to deploy the new one.
    """
    data = _admin(
        settings_for(data_dir),
        "POST",
        "/keys/rotate",
        lambda keys: KeyRotatedData(data=KeyRotated.model_validate(keys.rotate(project, grace))),
        body={"project": project, "grace_seconds": grace},
    )
    if as_json:
        print(json.dumps(data, indent=2))
        return
    for old in data["revoked"]:
        when = "at once" if old["status"] == "revoked" else f"at {_time(old['revoked_at'])}"
        console.print(f"{old['key_id']} ({old['prefix']}…) stops working {when}")
    console.print(f"new API key {data['key_id']} for project '{project}' (shown once):")
    print(data["api_key"])


def _admin(
    settings: Settings,
    method: str,
    path: str,
    direct: Callable[[KeyService], BaseModel],
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Any:
    """Return ``data`` of an admin route of the running collector, or of ``direct`` on the store."""
    running = read_runtime(settings.data_dir) if settings.is_embedded else None
    if running is not None:
        return admin_call(running, method, path, body, params)
    return _on_store(settings, direct)


def _on_store(settings: Settings, direct: Callable[[KeyService], BaseModel]) -> Any:
    from ..errors import ContractError
    from ..services.keys import KeyService

    with open_store(settings) as store:
        try:
            return direct(KeyService(store.keys)).model_dump(mode="json")["data"]
        except ContractError as exc:
            raise fail(exc.message) from None
        except Exception as exc:
            raise fail(f"the store {settings.store_url} failed: {first_line(exc)}") from None


def _print_keys(keys: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("PROJECT", "KEY ID", "PREFIX", "SCOPES", "CREATED", "LAST USED", "STATUS"):
        table.add_column(column, no_wrap=True)
    for key in keys:
        status = key["status"]
        when = key["expires_at"] if status == "expired" else key["revoked_at"]
        if status != "active" and when:
            status += f" {_time(when)}"
        table.add_row(
            key["project"],
            key["key_id"],
            f"{key['prefix']}…",
            ",".join(key.get("scopes") or ()),
            _time(key["created_at"]),
            _time(key["last_used_at"]) if key["last_used_at"] else "never",
            status,
        )
    out = Console()
    if not out.is_terminal:  # a pipe or a file: wide enough for every column (rich says 80)
        out = Console(width=200)
    out.print(table)


def _time(value: str) -> str:
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S UTC")
