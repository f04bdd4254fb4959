"""``promptrail users create``: make a user, the first instance admin above all.

promptrail users create --email E --password-stdin [--name N] [--instance-admin]

The password is read from standard input (never from an argument, which other users of the
machine can see in the process list). Like ``keys create``, it goes through the collector
running on the data dir (its loopback admin route) when there is one, else opens the store.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ..config import Settings
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

# Attached to the root app as ``users`` (root.py).
app = group("Manage user accounts.")


@app.command("create")
def create_user(
    email: Annotated[str, typer.Option(metavar="EMAIL", help="The user's e-mail address")],
    password_stdin: Annotated[
        bool,
        typer.Option("--password-stdin", help="Read the password (12+ characters) from stdin"),
    ] = False,
    name: Annotated[str | None, typer.Option(metavar="NAME", help="Display name")] = None,
    instance_admin: Annotated[
        bool,
        typer.Option("--instance-admin", help="May create projects and users"),
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Create a user. The first instance admin also owns every project without members."""
    password = _read_password() if password_stdin else None
    body: dict[str, Any] = {
        "email": email,
        "name": name,
        "password": password,
        "instance_admin": instance_admin,
    }
    settings = settings_for(data_dir)
    running = read_runtime(settings.data_dir) if settings.is_embedded else None
    user = admin_call(running, "POST", "/users", body) if running else _on_store(settings, body)
    role = " (instance admin)" if user["instance_admin"] else ""
    console.print(f"created user {user['email']}{role}, id {user['id']}")


def _read_password() -> str:
    text = sys.stdin.read()
    # One trailing line break is the end of the line typed or echoed, not the password.
    return text.removesuffix("\n").removesuffix("\r")


def _on_store(settings: Settings, body: dict[str, Any]) -> dict[str, Any]:
    from ..errors import ContractError
    from ..models.accounts import UserOut
    from ..services.accounts import Accounts, KeyProjects
    from ..store.accounts import AccountStore

    with open_store(settings) as store:
        accounts = Accounts.build(
            AccountStore(store.client, store.database, store.cluster),
            KeyProjects(store.keys.count_for, lambda: {row.project for row in store.keys.rows()}),
        )
        try:
            user = accounts.create_user(
                body["email"], body["password"], body["name"], body["instance_admin"]
            )
        except ContractError as exc:
            raise fail(exc.message) from None
        except Exception as exc:
            raise fail(f"the store {settings.store_url} failed: {first_line(exc)}") from None
        return UserOut.model_validate(user).model_dump(mode="json")
