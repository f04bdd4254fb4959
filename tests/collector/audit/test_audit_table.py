"""The audit table names real write routes of the access table, and every write route of the
contract's audited kinds is in it (a typo would silently record nothing)."""

from __future__ import annotations

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from promptrail.collector.access.audit_routes import AUDITED
from promptrail.collector.access.permissions import ROUTES
from promptrail.collector.api.audit_hook import audit_writes
from tests.collector.access.steps import app_routes

# Writes that are the data, not its configuration, or that change nothing stored: no entry.
NOT_AUDITED = {
    ("POST", "/v1/requests"),
    ("POST", "/v1/requests/batch"),
    ("POST", "/v1/traces"),
    ("POST", "/v1/requests/export"),
    ("POST", "/v1/scores"),
    ("POST", "/v1/scores/batch"),
    ("POST", "/v1/scores/tokens"),
    ("POST", "/v1/feedback/{token}"),
    ("DELETE", "/v1/scores/{score_id}"),
    ("POST", "/v1/experiments/{id}/results"),
    ("POST", "/v1/prompts/{id}/run"),
    ("POST", "/v1/prompts/{id}/versions/{version}/run"),
    ("POST", "/v1/prompts/{id}/versions/by-label/{label}/run"),
    ("POST", "/v1/playground/runs"),
    ("POST", "/v1/playground/estimates"),
    ("POST", "/v1/connections/{name}/check"),
    ("POST", "/v1/evaluators/try"),
}


def served_writes(api: TestClient) -> dict[tuple[str, str], APIRoute]:
    """Every write route the app serves under /v1, by (method, path)."""
    return {
        (method, path): route
        for method, path, route in app_routes(api.app)  # type: ignore[arg-type]
        if isinstance(route, APIRoute) and path.startswith("/v1/") and method != "GET"
    }


def test_every_audited_route_is_a_served_write_of_a_user_or_a_key(api: TestClient) -> None:
    served = served_writes(api)
    for method, paths in AUDITED.items():
        for path in paths:
            assert (method, path) in served, f"{method} {path} is no route"
            assert ROUTES[method][path].access in ("project", "instance_admin"), (method, path)


def test_every_write_by_a_user_or_a_key_is_audited_or_named_as_not(api: TestClient) -> None:
    for method, path in served_writes(api):
        if ROUTES[method][path].access not in ("project", "instance_admin"):
            continue  # sign-in, the loopback admin routes, feedback tokens
        audited = path in AUDITED.get(method, {})
        assert audited != ((method, path) in NOT_AUDITED), (method, path)


def test_only_the_audited_routes_run_the_hook(api: TestClient) -> None:
    """A read or an ingest never pays for the audit log: the hook is on the audited writes."""
    hooked = {
        (method, path)
        for method, path, route in app_routes(api.app)  # type: ignore[arg-type]
        if isinstance(route, APIRoute)
        and path.startswith("/v1/")  # /api/v1 serves the same route objects
        and any(getattr(d, "dependency", None) is audit_writes for d in route.dependencies)
    }
    audited = {(method, path) for method, paths in AUDITED.items() for path in paths}
    assert hooked == audited
