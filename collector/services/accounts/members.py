"""Project members and their roles (docs/api-notes.md, "Accounts").

An admin or owner of a project (or a key with the ``admin`` scope) lists, adds, changes and
removes its members; only an owner gives or takes the owner or admin role, or changes or removes
an owner or an admin. A project always keeps at least one owner. A role set here is
``manual`` and stays over what an identity provider's groups say at the next SSO sign-in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ...access.principal import ROLES, Role, Scope
from ...errors import Forbidden, UserNotFound, ValidationFailed
from ...store.accounts import AccountStore, MembershipRow, UserRow
from ...store.writes import WriteOutcome
from ..refused_writes import raise_if_refused
from .projects import ProjectService
from .users import UserService

_MANAGERS: frozenset[str] = frozenset({"owner", "admin"})


@dataclass(frozen=True)
class Actor:
    """Who asks, in the project at hand: a signed-in user's role there, or a key's scopes."""

    role: Role | None
    scopes: frozenset[Scope] | None = None
    user_id: str | None = None

    @property
    def is_owner(self) -> bool:
        """Whether the actor may manage owners and admins."""
        return self.role == "owner"

    @property
    def is_admin(self) -> bool:
        """Whether the actor may manage members (an admin, an owner or an ``admin`` key)."""
        return self.role in _MANAGERS or (self.scopes is not None and "admin" in self.scopes)


@dataclass(frozen=True)
class Member:
    """One member of a project, as the members routes answer."""

    user_id: str
    email: str
    name: str
    role: str
    role_source: str
    added_at: datetime


def check_role(role: str) -> Role:
    """Return ``role`` if it is one of the contract's roles, else raise a 400 naming it."""
    for known in ROLES:
        if known == role:
            return known
    raise ValidationFailed("role", f"role must be one of {', '.join(ROLES)}", allowed=list(ROLES))


class MemberService:
    """List, set and remove the members of a project."""

    def __init__(
        self,
        store: AccountStore,
        users: UserService,
        projects: ProjectService,
        on_roles_changed: Callable[[str], None],
        retry_after_seconds: int = 2,
    ) -> None:
        self._store = store
        self._users = users
        self._projects = projects
        self._on_roles_changed = on_roles_changed
        self._retry_after = retry_after_seconds

    def list(self, project: str, actor: Actor) -> list[Member]:
        """Return a project's members, in the order they joined (admin)."""
        self._projects.require(project)
        if not actor.is_admin:
            raise _forbidden("admin")
        rows = self._store.members(project)
        users = self._users.by_ids([row.user_id for row in rows])
        return [_member(row, users[row.user_id]) for row in rows if row.user_id in users]

    def put(self, project: str, email: str, role: str, actor: Actor) -> Member:
        """Give a user (by e-mail) a role in a project: a new member, or a changed role."""
        wanted = check_role(role)
        self._projects.require(project)
        if not actor.is_admin:
            raise _forbidden("admin")
        user = self._users.get(email)
        current = self._store.membership(project, user.id)
        touches_managers = wanted in _MANAGERS or (
            current is not None and current.role in _MANAGERS
        )
        if touches_managers and not actor.is_owner:
            raise _forbidden(
                "owner", "Only an owner gives, changes or takes an owner or admin role"
            )
        if current is not None and current.role == "owner" and wanted != "owner":
            self._keep_an_owner(project, user.id)
        row = MembershipRow(
            project,
            user.id,
            wanted,
            "manual",
            current.created_at if current else datetime.now(UTC),
        )
        self._stored(self._store.put_membership(row))
        self._on_roles_changed(user.id)
        return _member(row, user)

    def remove(self, project: str, email: str, actor: Actor) -> Member:
        """Take a user out of a project; answers the member it was."""
        self._projects.require(project)
        if not actor.is_admin:
            raise _forbidden("admin")
        user = self._users.get(email)
        current = self._store.membership(project, user.id)
        if current is None:
            raise UserNotFound(email, f"'{email}' is not a member of project '{project}'")
        if current.role in _MANAGERS and not actor.is_owner:
            raise _forbidden("owner", "Only an owner removes an owner or an admin")
        if current.role == "owner":
            self._keep_an_owner(project, user.id)
        self._stored(self._store.put_membership(current, removed=True))
        self._on_roles_changed(user.id)
        return _member(current, user)

    def _keep_an_owner(self, project: str, leaving: str) -> None:
        owners = [m for m in self._store.members(project) if m.role == "owner"]
        if all(m.user_id == leaving for m in owners):
            raise ValidationFailed(
                "role", f"Project '{project}' must keep an owner: make another member owner first"
            )

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "members")


def _member(row: MembershipRow, user: UserRow) -> Member:
    return Member(user.id, user.email, user.name, row.role, row.role_source, row.created_at)


def _forbidden(required_role: str, message: str | None = None) -> Forbidden:
    return Forbidden(
        message or f"This needs the {required_role} role in the project",
        {"required_role": required_role},
    )
