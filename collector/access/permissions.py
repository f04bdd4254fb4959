"""The one table from every route to what its caller needs: a scope for a key, a role for a user.

``api/access.py`` looks each request's route up here and refuses what the table does not
allow; ``tests/collector/access/test_permissions.py`` walks the app's routes and fails on any
route without an entry, so a new route cannot be served unchecked. docs/security.md, "Roles and
scopes", is this table in prose and is generated from it (:func:`markdown_table`).

Scopes include the narrower ones: ``admin`` grants every scope, ``write`` grants ``ingest``
(logging is a write), ``read`` grants ``prompts:read``. Roles: ``viewer`` reads everything but
keys and the audit log; ``annotator`` reads records, traces, sessions, users, scores and datasets
and writes scores; ``member`` every write but protected labels, connections, keys, members and
deleting records; ``admin`` those too; ``owner`` is an admin who also manages admins (the members
service decides that part, on the member being changed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from .principal import ROLES, Role, Scope

Access = Literal[
    "public", "admin_token", "feedback_token", "signed_in", "instance_admin", "project"
]
"""How a route authenticates its caller.

``public``: no one (sign-in, health, the console's files, the API documents);
``admin_token``: the loopback admin routes of ``promptrail keys``, by the runtime file's token;
``feedback_token``: the browser's feedback route, by its signed token; ``signed_in``: any user
with a session cookie; ``instance_admin``: a signed-in instance admin; ``project``: a key or a
signed-in user in one project, checked against :attr:`Permission.scope` and
:attr:`Permission.role`.
"""

RoleNeed = Literal["annotator_read", "annotator_write", "viewer", "member", "admin", "owner"]
"""Which roles a project route lets in (see :data:`ROLE_GRANTS`)."""

ROLE_GRANTS: Mapping[RoleNeed, frozenset[Role]] = {
    # Reads of records, traces, sessions, users, scores and datasets: every role.
    "annotator_read": frozenset(ROLES),
    # Score writes: annotators too, viewers not.
    "annotator_write": frozenset({"owner", "admin", "member", "annotator"}),
    "viewer": frozenset({"owner", "admin", "member", "viewer"}),
    "member": frozenset({"owner", "admin", "member"}),
    "admin": frozenset({"owner", "admin"}),
    "owner": frozenset({"owner"}),
}

# The role a refusal names in ``details.required_role``: the least role that is let in.
REQUIRED_ROLE: Mapping[RoleNeed, Role] = {
    "annotator_read": "annotator",
    "annotator_write": "annotator",
    "viewer": "viewer",
    "member": "member",
    "admin": "admin",
    "owner": "owner",
}

SCOPE_GRANTS: Mapping[Scope, frozenset[Scope]] = {
    "ingest": frozenset({"ingest", "write", "admin"}),
    "prompts:read": frozenset({"prompts:read", "read", "admin"}),
    "read": frozenset({"read", "admin"}),
    "write": frozenset({"write", "admin"}),
    "admin": frozenset({"admin"}),
}
"""Scope a route needs -> the scopes of a key that grant it."""


def held_scopes(scopes: frozenset[Scope] | None, role: Role | None) -> frozenset[Scope]:
    """Every scope a caller holds: a key's and those they grant; a user's role's.

    A key a caller makes may hold no scope beyond these (docs/api-notes.md, "Keys and
    scopes").
    """
    if scopes is not None:
        return frozenset(s for s, granted_by in SCOPE_GRANTS.items() if scopes & granted_by)
    return ROLE_SCOPES.get(role, frozenset()) if role else frozenset()


ROLE_SCOPES: Mapping[Role, frozenset[Scope]] = {
    "owner": frozenset(SCOPE_GRANTS),
    "admin": frozenset(SCOPE_GRANTS),
    "member": frozenset({"ingest", "prompts:read", "read", "write"}),
    "viewer": frozenset({"prompts:read", "read"}),
    "annotator": frozenset({"ingest"}),
}
"""The scopes whose routes a role may call (the most a key made by such a user could do)."""


@dataclass(frozen=True)
class Permission:
    """What the caller of one route needs."""

    access: Access
    scope: Scope | None = None
    """The scope a key needs (``details.required`` when missing); None: keys are refused."""
    role: RoleNeed | None = None
    """The roles a signed-in user needs in the project; None: users are refused."""

    def key_allowed(self, scopes: frozenset[Scope]) -> bool:
        """Whether a key with ``scopes`` may call the route."""
        return self.scope is not None and not scopes.isdisjoint(SCOPE_GRANTS[self.scope])

    def role_allowed(self, role: Role) -> bool:
        """Whether a user with ``role`` in the project may call the route."""
        return self.role is not None and role in ROLE_GRANTS[self.role]

    @property
    def required_role(self) -> Role | None:
        """The least role that may call the route (named in a refusal)."""
        return REQUIRED_ROLE[self.role] if self.role else None


PUBLIC = Permission("public")
ADMIN_TOKEN = Permission("admin_token")
FEEDBACK_TOKEN = Permission("feedback_token")
SIGNED_IN = Permission("signed_in")
INSTANCE_ADMIN = Permission("instance_admin")

PROMPT_READ = Permission("project", "prompts:read", "viewer")
READ = Permission("project", "read", "viewer")
RECORD_READ = Permission("project", "read", "annotator_read")
INGEST = Permission("project", "ingest", "member")
SCORE_WRITE = Permission("project", "ingest", "annotator_write")
WRITE = Permission("project", "write", "member")
ADMIN = Permission("project", "admin", "admin")
# A feedback token is signed for the key that mints it: only a key can.
KEY_INGEST = Permission("project", "ingest", None)

# Method -> path (as served under /v1; /api/v1 is the same table) -> what it needs. A mount
# (the console's files, the documents' assets) is listed under the method "*".
ROUTES: Mapping[str, Mapping[str, Permission]] = {
    "GET": {
        # Outside the API: documents, the console and the health check.
        "/": PUBLIC,
        "/health": PUBLIC,
        "/openapi.json": PUBLIC,
        "/docs": PUBLIC,
        "/docs/oauth2-redirect": PUBLIC,
        "/redoc": PUBLIC,
        # 4. Prompts, versions, labels; 12. their templates.
        "/v1/prompts": PROMPT_READ,
        "/v1/prompts/{name}": PROMPT_READ,
        "/v1/prompts/{name}/diff": PROMPT_READ,
        "/v1/prompts/{name}/versions": PROMPT_READ,
        "/v1/prompts/{name}/versions/{version}": PROMPT_READ,
        "/v1/prompts/{name}/labels": PROMPT_READ,
        "/v1/prompts/{id}/template": PROMPT_READ,
        "/v1/prompts/{id}/versions/{version}/template": PROMPT_READ,
        "/v1/prompts/{id}/versions/by-label/{label}/template": PROMPT_READ,
        "/v1/environments": RECORD_READ,
        # 7. Requests: list, search, detail, analytics, exports.
        "/v1/requests": RECORD_READ,
        "/v1/requests/search": RECORD_READ,
        "/v1/requests/analytics": RECORD_READ,
        "/v1/requests/{request_id}": RECORD_READ,
        "/v1/requests/exports/{export_id}": READ,
        "/v1/requests/exports/{export_id}/download": READ,
        # 9. Scores.
        "/v1/scores": RECORD_READ,
        "/v1/scores/{score_id}": RECORD_READ,
        "/v1/score-configs": RECORD_READ,
        # 10. Traces, sessions, users.
        "/v1/traces": RECORD_READ,
        "/v1/traces/{trace_id}": RECORD_READ,
        "/v1/sessions": RECORD_READ,
        "/v1/sessions/{session_id}": RECORD_READ,
        "/v1/users": RECORD_READ,
        # 11. Datasets and experiments.
        "/v1/datasets": RECORD_READ,
        "/v1/datasets/{name}": RECORD_READ,
        "/v1/datasets/{name}/items": RECORD_READ,
        "/v1/experiments": READ,
        "/v1/experiments/compare": READ,
        "/v1/experiments/{id}": READ,
        "/v1/experiments/{id}/results": READ,
        # 13. Connections (read by viewers; never their secrets).
        "/v1/connections": READ,
        "/v1/connections/{name}": READ,
        # 14. Online evaluation.
        "/v1/evaluators": READ,
        "/v1/evaluators/{name}": READ,
        "/v1/evaluation-rules": READ,
        "/v1/evaluation-rules/{id}": READ,
        "/v1/evaluation-rules/{id}/decisions": READ,
        # 15. Accounts: the sign-in routes check their own cookie.
        "/v1/auth/me": PUBLIC,
        "/v1/auth/oidc/login": PUBLIC,
        "/v1/auth/oidc/callback": PUBLIC,
        "/v1/projects": SIGNED_IN,
        "/v1/projects/{project}/members": ADMIN,
        "/v1/projects/{project}/protected-labels": READ,
        "/v1/users/accounts": INSTANCE_ADMIN,
        "/v1/keys": ADMIN,
        "/v1/audit": ADMIN,
        # The loopback administration of ``promptrail keys`` and backups.
        "/v1/admin/keys": ADMIN_TOKEN,
        "/v1/admin/backups/{job_id}": ADMIN_TOKEN,
        "/v1/admin/audit/verify": ADMIN_TOKEN,
    },
    "POST": {
        "/v1/prompts": WRITE,
        "/v1/prompts/{name}/rollback": WRITE,
        # 5. Runs call a model on the project's behalf.
        "/v1/prompts/{id}/run": WRITE,
        "/v1/prompts/{id}/versions/{version}/run": WRITE,
        "/v1/prompts/{id}/versions/by-label/{label}/run": WRITE,
        # 6. Logging; 10. OTLP spans.
        "/v1/requests": INGEST,
        "/v1/requests/batch": INGEST,
        "/v1/traces": INGEST,
        "/v1/requests/export": WRITE,
        # 9. Scores: annotators write them; a feedback token writes one score.
        "/v1/scores": SCORE_WRITE,
        "/v1/scores/batch": SCORE_WRITE,
        "/v1/scores/tokens": KEY_INGEST,
        "/v1/feedback/{token}": FEEDBACK_TOKEN,
        # 11. Datasets and experiments: a client-run experiment posts its results by ingest.
        "/v1/datasets": WRITE,
        "/v1/datasets/{name}/items": WRITE,
        "/v1/datasets/{name}/items/from-requests": WRITE,
        "/v1/experiments": WRITE,
        "/v1/experiments/{id}/cancel": WRITE,
        "/v1/experiments/{id}/results": INGEST,
        "/v1/experiments/{id}/complete": WRITE,
        # 13. Connections are admin's; the playground is a member's.
        "/v1/connections": ADMIN,
        "/v1/connections/{name}/check": ADMIN,
        "/v1/playground/runs": WRITE,
        "/v1/playground/estimates": WRITE,
        # 14. Online evaluation.
        "/v1/evaluation-rules": WRITE,
        "/v1/evaluation-rules/{id}/backfill": WRITE,
        "/v1/evaluators/try": WRITE,
        # 15. Accounts.
        "/v1/auth/login": PUBLIC,
        "/v1/auth/logout": PUBLIC,
        "/v1/projects": INSTANCE_ADMIN,
        "/v1/users/accounts": INSTANCE_ADMIN,
        "/v1/keys": ADMIN,
        "/v1/admin/keys": ADMIN_TOKEN,
        "/v1/admin/keys/revoke": ADMIN_TOKEN,
        "/v1/admin/keys/rotate": ADMIN_TOKEN,
        "/v1/admin/backups": ADMIN_TOKEN,
        "/v1/admin/users": ADMIN_TOKEN,
        # Fault injection (tests only, PROMPTRAIL_FAULT_INJECTION).
        "/v1/admin/store/stall": ADMIN_TOKEN,
        "/v1/admin/store/resume": ADMIN_TOKEN,
    },
    "PUT": {
        "/v1/prompts/{name}/labels/{label}": WRITE,
        "/v1/score-configs/{name}": WRITE,
        "/v1/evaluators/{name}": WRITE,
        "/v1/projects/{project}/members/{email}": ADMIN,
        "/v1/projects/{project}/protected-labels": ADMIN,
    },
    "PATCH": {
        "/v1/prompts/{name}": WRITE,
        "/v1/users/accounts/{email}": INSTANCE_ADMIN,
        "/v1/connections/{name}": ADMIN,
        "/v1/evaluation-rules/{id}": WRITE,
    },
    "DELETE": {
        "/v1/prompts/{name}": WRITE,
        "/v1/prompts/{name}/labels/{label}": WRITE,
        # Deleting records is an admin's.
        "/v1/requests": ADMIN,
        "/v1/scores/{score_id}": WRITE,
        "/v1/datasets/{name}": WRITE,
        "/v1/datasets/{name}/items/{item_id}": WRITE,
        "/v1/connections/{name}": ADMIN,
        "/v1/evaluation-rules/{id}": WRITE,
        "/v1/evaluators/{name}": WRITE,
        "/v1/projects/{project}/members/{email}": ADMIN,
    },
    "*": {
        "/docs/assets": PUBLIC,
        "/console": PUBLIC,
    },
}

_API_PREFIXES = ("/api/v1/", "/v1/")


def permission_for(method: str, path: str) -> Permission | None:
    """Return what the route ``method path`` needs (``path`` as routed, /v1 or /api/v1), or None.

    ``HEAD`` is looked up as ``GET``.
    """
    if path.startswith("/api/v1/"):
        path = path[len("/api") :]
    return ROUTES.get("GET" if method == "HEAD" else method, {}).get(path)


def api_permission(method: str, route_path: str) -> Permission | None:
    """Return what an API route needs, given its path without the ``/v1`` prefix."""
    return ROUTES.get("GET" if method == "HEAD" else method, {}).get("/v1" + route_path)


def entries() -> Iterator[tuple[str, str, Permission]]:
    """Every (method, path, permission) of the table, in its order."""
    for method, paths in ROUTES.items():
        for path, permission in paths.items():
            yield method, path, permission


def markdown_table() -> str:
    """The table as docs/security.md shows it: each project route, its scope and its roles."""
    lines = [
        "| method | path | key scope | roles |",
        "|---|---|---|---|",
    ]
    for method, path, permission in entries():
        if permission.access == "project":
            roles = ", ".join(r for r in ROLES if permission.role_allowed(r))
            lines.append(f"| {method} | `{path}` | `{permission.scope}` | {roles} |")
        else:
            lines.append(f"| {method} | `{path}` | {permission.access.replace('_', ' ')} | |")
    return "\n".join(lines)
