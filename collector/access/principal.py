"""The caller of a request: a key or a signed-in user, and the project it acts in.

These names are the interface between the enforcement (``api/access.py``) and the accounts
service: the accounts service implements :class:`SessionResolver`, the enforcement turns a
session cookie or a key into a :class:`Principal` (docs/security.md, "Roles and scopes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

Role = Literal["owner", "admin", "member", "viewer", "annotator"]
"""A user's role in one project (docs/security.md, "Roles and scopes")."""

Scope = Literal["ingest", "prompts:read", "read", "write", "admin"]
"""What a key may do in its project (docs/api-notes.md, "Keys and scopes")."""

ROLES: tuple[Role, ...] = get_args(Role)
"""Every role, the most powerful first."""

SCOPES: tuple[Scope, ...] = get_args(Scope)
"""Every scope, in the order the docs list them."""

ALL_SCOPES: frozenset[Scope] = frozenset(SCOPES)
"""The scopes of a key made before keys had scopes, and of the development key."""

SESSION_COOKIE = "promptrail_session"
"""The name of the cookie that carries a signed-in user's session token."""


@dataclass(frozen=True)
class SignedIn:
    """A user whose session token is valid: who they are and their role in each project."""

    user_id: str
    email: str
    roles: Mapping[str, Role]
    """Project -> role, the user's projects in order (the first is the default project)."""
    csrf_token: str
    """The token a write made by this session's cookie must repeat in ``X-CSRF-Token``."""
    instance_admin: bool
    """Whether the user may create projects and users (inside a project it acts by its role)."""


class SessionResolver(Protocol):
    """Turns a session cookie's token into the signed-in user (implemented by accounts)."""

    def resolve(self, token: str) -> SignedIn | None:
        """Return the user of a live session, or None for an unknown, ended or disabled one."""
        ...


@dataclass(frozen=True)
class Principal:
    """Who is calling, in which project."""

    project: str
    scopes: frozenset[Scope] | None
    """A key's scopes; None for a signed-in user."""
    role: Role | None
    """A user's role in the project; None for a key."""
    user_id: str | None
    """The signed-in user's id; None for a key."""
    key_id: str | None
    """The key's id; None for a signed-in user."""
