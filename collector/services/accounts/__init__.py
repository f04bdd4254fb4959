"""Accounts: users, passwords, sign-in sessions, projects and members (docs/security.md,
"Accounts"; docs/api-notes.md, "Accounts").

:class:`Accounts` wires the parts over one :class:`~collector.store.accounts.AccountStore`;
its ``sessions`` is the access layer's ``SessionResolver``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...errors import ValidationFailed
from ...store.accounts import AccountStore, UserRow
from .login_limits import LoginLimits
from .members import Actor, Member, MemberService
from .passwords import Passwords
from .projects import KeyProjects, ProjectService
from .sessions import NewSession, SessionService
from .users import UserService

__all__ = [
    "Accounts",
    "Actor",
    "KeyProjects",
    "Member",
    "MemberService",
    "NewSession",
    "ProjectService",
    "SessionService",
    "UserService",
]

logger = logging.getLogger("promptrail.accounts")


@dataclass
class Accounts:
    """Every accounts service of one collector."""

    users: UserService
    sessions: SessionService
    projects: ProjectService
    members: MemberService

    @classmethod
    def build(
        cls, store: AccountStore, keys: KeyProjects, retry_after_seconds: int = 2
    ) -> Accounts:
        """Wire the services over ``store``; ``keys`` tells which projects API keys name."""
        passwords = Passwords()
        sessions = SessionService(store, passwords, LoginLimits(), retry_after_seconds)
        users = UserService(store, passwords, sessions.end_user_sessions, retry_after_seconds)
        projects = ProjectService(store, keys, sessions.roles_changed, retry_after_seconds)
        members = MemberService(store, users, projects, sessions.roles_changed, retry_after_seconds)
        return cls(users, sessions, projects, members)

    def create_user(
        self,
        email: str,
        password: str | None = None,
        name: str | None = None,
        instance_admin: bool = False,
    ) -> UserRow:
        """Create a user; the first instance admin of a store also becomes owner of every
        project without members (those API keys made before accounts, and ``default``)."""
        first = instance_admin and not self.users.has_users()
        user = self.users.create(email, password, name, instance_admin)
        if first:
            adopted = self.projects.adopt_ownerless(user.id)
            logger.info("first instance admin %s owns %s", user.email, ", ".join(adopted))
        return user

    def ensure_initial_admin(self, email: str, password: str) -> bool:
        """Make sure the instance admin of ``PROMPTRAIL_INIT_ADMIN_EMAIL`` exists; return
        whether it was created. An existing user is left as it is (its password too)."""
        if self.users.find(email) is not None:
            return False
        try:
            self.create_user(email, password, instance_admin=True)
        except ValidationFailed as exc:
            # Said at start-up: name the setting, not a request's field.
            setting = f"PROMPTRAIL_INIT_ADMIN_{str(exc.details.get('field', '')).upper()}"
            raise ValueError(f"{setting}: {exc.message}") from None
        return True
