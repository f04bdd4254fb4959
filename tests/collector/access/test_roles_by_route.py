"""Route by route, over the access table: a viewer writes nothing and an annotator writes only
scores (issue 51, "Bad input and safety"; docs/security.md, "Roles and scopes"). Each signed in
with a session cookie and sending its CSRF token, so the role alone refuses: 403 FORBIDDEN
naming ``details.required_role`` (or, for a route of keys only, ``details.reason``), never a
500, and the same under /api/v1.

One collector serves the whole module (real chDB, real HTTP through the ASGI transport); the
users, members and sessions are the accounts service's own.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.access.permissions import Permission, entries
from promptrail.collector.access.principal import SESSION_COOKIE, Role
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.services.accounts.members import Actor
from tests.collector.access.steps import PASSWORD, PROMPT, app_routes
from tests.collector.contract import assert_error
from tests.databases import ReusableDatabase, drop_database
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY

WRITES = ("POST", "PUT", "PATCH", "DELETE")
_SERVED = {
    (method, path)
    for method, path, _ in app_routes(create_app(Settings()))
    if path.startswith("/v1/")
}
# Every project route the app serves that a viewer or an annotator may not call.
CASES = [
    (role, method, path, permission)
    for role in ("viewer", "annotator")
    for method, path, permission in entries()
    if permission.access == "project"
    and (method, path) in _SERVED
    and not permission.role_allowed(role)
]

Browsers = dict[Role, tuple[TestClient, dict[str, str]]]


@pytest.fixture(scope="module")
def browsers(
    store_url: str, reusable_database: ReusableDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Browsers]:
    """A collector on a database of its own for the module, and a browser signed in as a
    viewer and one as an annotator of project default (each with its CSRF header)."""
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=Path(tmp_path_factory.mktemp("roles")),
        init_api_key=DEFAULT_KEY,
    )
    try:
        # A copy of the process's migrated template (~0.15 s of CPU), not migrated anew.
        reusable_database.make_migrated(settings.database)
        app = create_app(settings)
        with TestClient(app, headers=DEFAULT_AUTH) as api:
            assert api.post("/v1/prompts", json=PROMPT).status_code == 201
            accounts = app.state.services.accounts
            accounts.create_user("owner@example.com", PASSWORD, instance_admin=True)
            signed_in: Browsers = {}
            for role in ("viewer", "annotator"):
                email = f"{role}@example.com"
                accounts.create_user(email, PASSWORD)
                accounts.members.put("default", email, role, Actor(role="owner"))
                session = accounts.sessions.sign_in(email, PASSWORD)
                browser = TestClient(app, cookies={SESSION_COOKIE: session.token})
                signed_in[role] = (browser, {"X-CSRF-Token": session.signed_in.csrf_token})
            yield signed_in
    finally:
        drop_database(store_url, settings.database)


def call(browser: TestClient, method: str, path: str, headers: dict[str, str]) -> object:
    """One request to the route: path names filled in (``{project}``: default), a JSON body
    for writes (an empty object: the role is checked before any judgement of it)."""
    url = re.sub(r"\{(\w+)\}", lambda m: "default" if m.group(1) == "project" else "x", path)
    body: dict[str, object] | None = {} if method in ("POST", "PUT", "PATCH") else None
    return browser.request(method, url, json=body, headers=headers)


def assert_refused_for_role(response: object, permission: Permission) -> None:
    details = assert_error(response, 403, "FORBIDDEN", type_="permission_error")
    if permission.role is None:
        assert details["reason"] == "key_only"
    else:
        assert details["required_role"] == permission.required_role


@pytest.mark.parametrize(
    ("role", "method", "path", "permission"),
    CASES,
    ids=[f"{role} {method} {path}" for role, method, path, _ in CASES],
)
def test_a_role_is_refused_what_the_table_does_not_give_it(
    browsers: Browsers, role: Role, method: str, path: str, permission: Permission
) -> None:
    browser, csrf = browsers[role]

    assert_refused_for_role(call(browser, method, path, csrf), permission)
    assert_refused_for_role(call(browser, method, "/api" + path, csrf), permission)


def test_a_viewer_writes_nothing_and_an_annotator_only_scores() -> None:
    refused = {(role, method, path) for role, method, path, _ in CASES}
    project_writes = [
        (method, path, permission)
        for method, path, permission in entries()
        if permission.access == "project" and method in WRITES and (method, path) in _SERVED
    ]
    assert len(project_writes) > 30
    for method, path, permission in project_writes:
        assert ("viewer", method, path) in refused, (method, path)
        if permission.role == "annotator_write":
            assert path.startswith("/v1/scores"), path  # the one write an annotator makes
        else:
            assert ("annotator", method, path) in refused, (method, path)
    # What the issue names: an annotator reads no prompt and no connection.
    for path in ("/v1/prompts/{name}", "/v1/connections", "/v1/connections/{name}"):
        assert ("annotator", "GET", path) in refused, path


def test_the_annotator_still_writes_a_score(browsers: Browsers) -> None:
    annotator, csrf = browsers["annotator"]
    logged = annotator.post(
        "/v1/scores", json={"name": "helpful", "value": 1, "request_id": "req_none"}, headers=csrf
    )
    assert logged.status_code != 403, logged.text
    assert logged.status_code < 500, logged.text
