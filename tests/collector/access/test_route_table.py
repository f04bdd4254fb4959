"""Every route of the app has an entry in the access table (docs/security.md, "Roles and
scopes"), and every route that acts in a project is checked by it.

A route added without an entry would be served to no one (the check fails closed); this walk
names it before that reaches a user.
"""

from __future__ import annotations

import pytest
from fastapi.routing import APIRoute

from promptrail.collector.access.permissions import (
    ROUTES,
    SCOPE_GRANTS,
    Permission,
    entries,
    markdown_table,
    permission_for,
)
from promptrail.collector.access.principal import SCOPES
from promptrail.collector.api.deps import current_principal, current_project
from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from tests.collector.access.steps import app_routes


@pytest.fixture(scope="module")
def every_route() -> list[tuple[str, str, object]]:
    """The routes of a collector with every optional router on (fault injection too)."""
    return list(app_routes(create_app(Settings(fault_injection=True))))


def test_every_route_of_the_app_has_an_entry(every_route: list[tuple[str, str, object]]) -> None:
    missing = [f"{m} {p}" for m, p, _ in every_route if permission_for(m, p) is None]
    assert not missing, f"routes without an entry in access/permissions.py: {missing}"
    # Both prefixes serve the same routes, so both find an entry.
    served = {(m, p) for m, p, _ in every_route}
    assert ("GET", "/v1/prompts") in served
    assert ("GET", "/api/v1/prompts") in served


def depends_on(route: APIRoute, call: object) -> bool:
    """Whether ``call`` is among the route's dependencies, at any depth."""
    pending = list(route.dependant.dependencies)
    while pending:
        dependency = pending.pop()
        if dependency.call is call:
            return True
        pending.extend(dependency.dependencies)
    return False


def test_a_route_that_acts_in_a_project_is_a_project_entry(
    every_route: list[tuple[str, str, object]],
) -> None:
    """A route reading the caller's project must be checked as one (a key's scope, a role)."""
    wrong = [
        f"{m} {p}"
        for m, p, route in every_route
        if isinstance(route, APIRoute)
        and (depends_on(route, current_project) or depends_on(route, current_principal))
        and (permission := permission_for(m, p)) is not None
        and permission.access != "project"
    ]
    assert not wrong, f"routes taking the caller's project, not 'project' entries: {wrong}"


def test_every_project_entry_names_a_scope_and_every_scope_is_used() -> None:
    project = [perm for _, _, perm in entries() if perm.access == "project"]
    assert all(perm.scope in SCOPE_GRANTS for perm in project)
    assert {perm.scope for perm in project} == set(SCOPES)
    # Keys and the audit log are an admin's, for keys and users alike.
    for method in ("GET", "POST"):
        assert ROUTES[method]["/v1/keys"] == Permission("project", "admin", "admin")
    assert ROUTES["GET"]["/v1/audit"].scope == "admin"


def test_the_docs_show_the_table() -> None:
    """docs/security.md carries the table as generated from the code, row for row."""
    from pathlib import Path

    docs = (Path(__file__).parents[3] / "docs" / "security.md").read_text()
    assert markdown_table() in docs
