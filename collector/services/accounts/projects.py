"""Projects: made by an instance admin, who becomes their owner (docs/api-notes.md, "Accounts").

Before accounts, a project existed because an API key named it, and it still does: a project
is known when it is registered here, has a member, or has a key. An instance admin creating a
project that only keys name (and that has no member yet) registers it and becomes its owner,
so a project made by ``promptrail keys create`` can be given people.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ...errors import Forbidden, ProjectAlreadyExists, ProjectNotFound, ValidationFailed
from ...store.accounts import AccountStore, MembershipRow, ProjectRow
from ...store.writes import WriteOutcome
from ..refused_writes import raise_if_refused

# The projects API keys name take the same shape (services/keys.py).
_PROJECT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


@dataclass(frozen=True)
class KeyProjects:
    """What the accounts service reads of the API keys: how many a project has, and every
    project some key names."""

    count: Callable[[str], int]
    every: Callable[[], Iterable[str]]


def check_project_name(name: str, field: str = "name") -> str:
    """Return ``name`` if it is a valid project name, else raise a 400 naming ``field``."""
    if not _PROJECT.fullmatch(name):
        raise ValidationFailed(
            field,
            f"{field} must be 1-64 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit",
        )
    return name


class ProjectService:
    """Create projects and say whether one exists."""

    def __init__(
        self,
        store: AccountStore,
        keys: KeyProjects,
        on_roles_changed: Callable[[str], None],
        retry_after_seconds: int = 2,
    ) -> None:
        self._store = store
        self._keys = keys
        self._on_roles_changed = on_roles_changed
        self._retry_after = retry_after_seconds
        self._lock = threading.Lock()

    def exists(self, name: str) -> bool:
        """Return whether a project is registered, has a member, or has an API key."""
        return (
            self._store.project(name) is not None
            or self._store.has_members(name)
            or self._keys.count(name) > 0
        )

    def require(self, name: str) -> None:
        """Raise 404 PROJECT_NOT_FOUND unless the project exists."""
        if not _PROJECT.fullmatch(name) or not self.exists(name):
            raise ProjectNotFound(name)

    def create(self, name: str, user_id: str, instance_admin: bool) -> ProjectRow:
        """Register a project made by an instance admin, who becomes its owner.

        409 PROJECT_ALREADY_EXISTS for a registered project or one with members; a project
        only API keys name is registered (see the module's notes).
        """
        if not instance_admin:
            raise Forbidden(
                "Only an instance admin creates projects", {"required_role": "instance_admin"}
            )
        check_project_name(name)
        now = datetime.now(UTC)
        with self._lock:
            if self._store.project(name) is not None or self._store.has_members(name):
                raise ProjectAlreadyExists(name)
            row = ProjectRow(name, now, user_id)
            self._stored(self._store.put_project(row))
            self._stored(
                self._store.put_membership(MembershipRow(name, user_id, "owner", "manual", now))
            )
        self._on_roles_changed(user_id)
        return row

    def of_user(self, user_id: str) -> list[tuple[str, str, ProjectRow | None]]:
        """Return a user's projects in order (the default first): name, role and the project's
        registration (None for a project only keys name)."""
        return [
            (m.project, m.role, self._store.project(m.project))
            for m in self._store.memberships_of_user(user_id)
        ]

    def adopt_ownerless(self, user_id: str) -> list[str]:
        """Make ``user_id`` owner of every project without members (the first instance admin
        on a store made before accounts: its keys' projects); return those projects."""
        now = datetime.now(UTC)
        adopted: list[str] = []
        for name in sorted({*self._keys.every(), "default"}):
            if _PROJECT.fullmatch(name) and not self._store.has_members(name):
                self._stored(self._store.put_project(ProjectRow(name, now, user_id)))
                membership = MembershipRow(name, user_id, "owner", "manual", now)
                self._stored(self._store.put_membership(membership))
                adopted.append(name)
        self._on_roles_changed(user_id)
        return adopted

    def _stored(self, outcome: WriteOutcome) -> None:
        raise_if_refused(outcome, self._retry_after, "projects")
