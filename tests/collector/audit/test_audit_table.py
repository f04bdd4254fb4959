"""The audit table names real write routes of the access table, and every write route of the
contract's audited kinds is in it (a typo would silently record nothing)."""

from __future__ import annotations

from promptrail.collector.access.audit_routes import AUDITED
from promptrail.collector.access.permissions import ROUTES

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
    ("POST", "/v1/connections/{name}/check"),
    ("POST", "/v1/evaluators/try"),
}


def test_every_audited_route_is_a_project_write_of_the_access_table() -> None:
    for method, paths in AUDITED.items():
        assert method != "GET"
        for path in paths:
            permission = ROUTES[method].get(path)
            assert permission is not None, f"{method} {path} is no route"
            assert permission.access in ("project", "instance_admin"), (method, path)


def test_every_write_by_a_user_or_a_key_is_audited_or_named_as_not() -> None:
    for method, paths in ROUTES.items():
        if method in ("GET", "*"):
            continue
        for path, permission in paths.items():
            if permission.access not in ("project", "instance_admin"):
                continue  # sign-in, the loopback admin routes, feedback tokens
            audited = path in AUDITED.get(method, {})
            assert audited != ((method, path) in NOT_AUDITED), (method, path)
