"""An existing data dir upgrades in place (issue 51 point 8; docs/deploy.md, "People and
sign-in"): a store as the release before accounts left it, its key made as that release made
keys (no scopes, no maker), opened by today's collector. The old key keeps every scope and does
everything it did before (reads, writes, ingest, deletes, keys), with no user made; the first
admin made after the upgrade owns the old keys' projects, and the old keys keep working beside
it. Real chDB, real HTTP (ASGI transport).
"""

from __future__ import annotations

import hashlib
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.schema import AddColumn, Table, View
from tests.keys import DEFAULT_AUTH

OLD_KEY = "pr-a-key-of-the-release-before-accounts"
OLD_AUTH = {"Authorization": f"Bearer {OLD_KEY}"}
TEAM_KEY = "pr-a-key-of-another-project-before-accounts"
ADMIN = {"email": "ada@example.com", "password": "correct horse battery staple"}
EVERY_SCOPE = ["ingest", "prompts:read", "read", "write", "admin"]
RECORD = {"model": "gpt-4o-mini", "input": "hi", "output": {"content": "hello"}}
# Today's migrations: scoped keys and protected labels, accounts, the audit log.
ACCESS_MIGRATIONS = (30, 31, 34)


def roll_back_access(settings: Settings) -> None:
    """Put the store back as the release before accounts left it: no scoped-key columns, no
    accounts, protected labels or audit tables, those migrations not recorded; and a key of
    that release in project default and one in team-b, rows of the four columns its key table
    had."""
    client = open_client(settings.store_url)
    db = f"`{settings.database}`"
    for migration in migrations.MIGRATIONS:
        if migration.version not in ACCESS_MIGRATIONS:
            continue
        for obj in migration.objects:
            if isinstance(obj, AddColumn):
                client.command(f"ALTER TABLE {db}.`{obj.table.name}` DROP COLUMN `{obj.column}`")
            elif isinstance(obj, Table | View):
                client.command(f"DROP TABLE IF EXISTS {db}.`{obj.name}`")
            else:  # pragma: no cover - a new kind of step in these migrations
                raise AssertionError(obj)
    versions = ", ".join(str(v) for v in ACCESS_MIGRATIONS)
    client.command(
        f"ALTER TABLE {db}.schema_migrations DELETE WHERE version IN ({versions})",
        settings={"mutations_sync": 2},
    )
    for key, project in ((OLD_KEY, "default"), (TEAM_KEY, "team-b")):
        digest = hashlib.sha256(key.encode()).hexdigest()
        client.command(
            f"INSERT INTO {db}.api_keys VALUES ('{digest}', '{project}', '{key[:8]}', now64(3))"
        )
    client.close()


def written_before(settings: Settings) -> dict[str, Any]:
    """A prompt with a label and a record, written with the development key; what reads back."""
    with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:
        made = api.post("/v1/prompts", json={"name": "greet", "template": "Hi", "model": "m"})
        assert made.status_code == 201, made.text
        labeled = api.put("/v1/prompts/greet/labels/production", json={"version": 1})
        assert labeled.status_code == 200, labeled.text
        logged = api.post("/v1/requests", json={**RECORD, "id": "req_before"})
        assert logged.status_code in (200, 201, 202), logged.text
        return {
            "prompt": api.get("/v1/prompts/greet").json()["data"],
            "template": api.get("/v1/prompts/greet/versions/by-label/production/template").json(),
        }


def test_an_upgraded_store_keeps_its_keys_with_every_scope_and_needs_no_user(
    settings: Settings,
) -> None:
    before = written_before(settings)
    roll_back_access(settings)

    # Today's collector on the old store, without a development key of its own to lean on.
    upgraded = settings.model_copy(update={"init_api_key": None})
    app = create_app(upgraded)
    with TestClient(app, headers=OLD_AUTH) as api:
        applied = {
            int(row[0])
            for row in app.state.services.store.client.query(
                f"SELECT version FROM `{settings.database}`.schema_migrations"
            ).result_rows
        }
        assert set(ACCESS_MIGRATIONS) <= applied

        # The keys list (admin) shows both old keys with every scope, made by no one.
        keys = api.get("/v1/keys")
        assert keys.status_code == 200, keys.text
        listed = keys.json()["data"]
        assert len(listed) == 2
        assert all(key["scopes"] == EVERY_SCOPE for key in listed), listed
        assert all(key["created_by"] == "" and key["expires_at"] is None for key in listed)

        # Reads of what the release before wrote.
        assert api.get("/v1/prompts/greet").json()["data"] == before["prompt"]
        template = api.get("/v1/prompts/greet/versions/by-label/production/template")
        assert template.json() == before["template"]
        assert api.get("/v1/requests/req_before").status_code == 200

        # Writes, ingest, a label moved (no label is protected after an upgrade), a delete.
        patched = api.patch("/v1/prompts/greet", json={"template": "Hello"})
        assert patched.status_code == 200, patched.text
        moved = api.put("/v1/prompts/greet/labels/production", json={"version": 2})
        assert moved.status_code == 200, moved.text
        logged = api.post("/v1/requests", json={**RECORD, "id": "req_after"})
        assert logged.status_code in (200, 201, 202), logged.text
        deleted = api.request("DELETE", "/v1/requests", json={"metadata": {"a": "b"}})
        assert deleted.status_code < 300, deleted.text

        # Admin writes: a key of its own choosing, the project's protected labels.
        made = api.post("/v1/keys", json={"scopes": EVERY_SCOPE, "name": "after"})
        assert made.status_code == 201, made.text
        assert made.json()["data"]["scopes"] == EVERY_SCOPE
        protected = api.put(
            "/v1/projects/default/protected-labels", json={"labels": ["production"]}
        )
        assert protected.status_code == 200, protected.text

        # The development key of the first start works as before, and no user was needed.
        assert api.get("/v1/prompts/greet", headers=DEFAULT_AUTH).status_code == 200
        assert not app.state.services.accounts.users.has_users()


def test_the_first_admin_of_an_upgraded_store_owns_its_projects_and_locks_no_key_out(
    settings: Settings,
) -> None:
    written_before(settings)
    roll_back_access(settings)

    # The first admin made by the environment at the first start after the upgrade.
    upgraded = settings.model_copy(
        update={
            "init_api_key": None,
            "init_admin_email": ADMIN["email"],
            "init_admin_password": SecretStr(ADMIN["password"]),
        }
    )
    app = create_app(upgraded)
    with TestClient(app, headers=OLD_AUTH) as api:
        browser = TestClient(app)
        signed_in = browser.post("/v1/auth/login", json=ADMIN)
        assert signed_in.status_code == 200, signed_in.text
        projects = {p["name"]: p["role"] for p in signed_in.json()["data"]["projects"]}
        assert projects == {"default": "owner", "team-b": "owner"}
        assert browser.get("/v1/prompts/greet").status_code == 200
        other = browser.get("/v1/prompts", headers={"X-Promptrail-Project": "team-b"})
        assert other.status_code == 200, other.text

        # A user now exists; the keys made before still do all they did.
        patched = api.patch("/v1/prompts/greet", json={"template": "Hello"})
        assert patched.status_code == 200, patched.text
        assert api.get("/v1/keys").status_code == 200
        team = {"Authorization": f"Bearer {TEAM_KEY}"}
        made = api.post(
            "/v1/prompts", json={"name": "b", "template": "x", "model": "m"}, headers=team
        )
        assert made.status_code == 201, made.text
        assert api.get("/v1/keys", headers=team).json()["data"][0]["scopes"] == EVERY_SCOPE
        logged = api.post("/v1/requests", json=RECORD, headers=team)
        assert logged.status_code in (200, 201, 202), logged.text
