"""Route by route, over the access table: a key without the route's scope is refused with 403
INSUFFICIENT_SCOPE naming it, and a key holding just that scope is not refused
(docs/security.md, "Roles and scopes").

One collector serves the whole module (real chDB, real HTTP through the ASGI transport); each
case makes its two keys through the service, as ``promptrail keys create --scopes`` does.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.access.permissions import SCOPE_GRANTS, entries
from promptrail.collector.access.principal import ALL_SCOPES, Scope
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.collector.access.steps import app_routes
from tests.collector.contract import assert_error
from tests.databases import ReusableDatabase, drop_database
from tests.keys import DEFAULT_KEY

_SERVED = {
    (method, path)
    for method, path, _ in app_routes(create_app(Settings()))
    if path.startswith("/v1/")
}
# Every route the app serves that acts in a project, with the scope it needs.
CASES = [
    (method, path, permission.scope)
    for method, path, permission in entries()
    if permission.access == "project" and (method, path) in _SERVED and permission.scope
]


@pytest.fixture(scope="module")
def collector(
    store_url: str, reusable_database: ReusableDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    """A collector on a database of its own for the module; its default key has every scope."""
    settings = Settings(
        clickhouse_url=store_url,
        database=f"t_{uuid.uuid4().hex[:16]}",
        data_dir=Path(tmp_path_factory.mktemp("scopes")),
        init_api_key=DEFAULT_KEY,
    )
    try:
        # A copy of the process's migrated template (~0.15 s of CPU), not migrated anew.
        reusable_database.make_migrated(settings.database)
        with TestClient(create_app(settings)) as client:
            yield client
    finally:
        drop_database(store_url, settings.database)


def key_with(client: TestClient, scopes: frozenset[Scope]) -> dict[str, str]:
    """The headers of a new key of project default holding ``scopes``."""
    key = client.app.state.services.keys.create("default", scopes)  # type: ignore[attr-defined]
    return {"Authorization": f"Bearer {key}"}


def call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> object:
    """One request to the route: path names filled in (``{project}``: the key's), a JSON body
    for writes (an empty object: the check comes before any judgement of it)."""
    url = re.sub(r"\{(\w+)\}", lambda m: "default" if m.group(1) == "project" else "x", path)
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return client.request(method, url, json=body, headers=headers)


@pytest.mark.parametrize(("method", "path", "scope"), CASES, ids=[f"{m} {p}" for m, p, _ in CASES])
def test_a_key_needs_the_route_scope(
    collector: TestClient, method: str, path: str, scope: Scope
) -> None:
    lacking = ALL_SCOPES - SCOPE_GRANTS[scope]
    refused = call(collector, method, path, key_with(collector, lacking))
    details = assert_error(refused, 403, "INSUFFICIENT_SCOPE", type_="permission_error")
    assert details["required"] == scope

    # The same under /api/v1, the same table.
    again = call(collector, method, "/api" + path, key_with(collector, lacking))
    assert_error(again, 403, "INSUFFICIENT_SCOPE", type_="permission_error")

    allowed = call(collector, method, path, key_with(collector, frozenset({scope})))
    assert allowed.status_code != 403, allowed.text  # type: ignore[attr-defined]
    assert allowed.status_code != 401, allowed.text  # type: ignore[attr-defined]


def test_the_cases_cover_every_scope_and_the_routes_users_rely_on() -> None:
    assert {scope for _, _, scope in CASES} == set(ALL_SCOPES)
    covered = {(m, p) for m, p, _ in CASES}
    for route in [
        ("GET", "/v1/prompts/{name}"),
        ("POST", "/v1/requests"),
        ("POST", "/v1/traces"),
        ("DELETE", "/v1/requests"),
        ("PUT", "/v1/prompts/{name}/labels/{label}"),
        ("POST", "/v1/keys"),
    ]:
        assert route in covered
