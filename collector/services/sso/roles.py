"""An identity provider's groups as project roles (docs/security.md, "SSO").

``PROMPTRAIL_OIDC_ROLE_MAP`` maps a group to ``<project>:<role>``. At each SSO sign-in the
user's groups decide its ``sso`` memberships: a project a group maps to gets the most powerful
role its groups give (a new membership or a changed role); an ``sso`` membership no group maps
to any more is removed. A ``manual`` membership (set by an admin through the members routes,
or the owner of a project it created) is never changed nor removed by the mapping. A project
that does not exist is skipped (only an instance admin creates projects), and a project's last
owner is never demoted or removed by it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from ...access.principal import ROLES, Role
from ...store.accounts import AccountStore, MembershipRow
from ...store.writes import WriteOutcome

logger = logging.getLogger("promptrail.sso")

SSO = "sso"
MANUAL = "manual"


@dataclass(frozen=True)
class RoleChanges:
    """What one sign-in changed: project -> new role, and the projects left."""

    set: dict[str, str]
    removed: list[str]


def mapped_roles(groups: Iterable[str], role_map: Mapping[str, str]) -> dict[str, Role]:
    """The role each project gets from ``groups``: the most powerful one its groups give."""
    wanted: dict[str, Role] = {}
    for group in groups:
        target = role_map.get(group)
        if target is None:
            continue
        project, _, name = target.rpartition(":")
        role = next((r for r in ROLES if r == name), None)
        if role is None:
            continue
        current = wanted.get(project)
        # ROLES lists the most powerful first.
        if current is None or ROLES.index(role) < ROLES.index(current):
            wanted[project] = role
    return wanted


def apply_roles(
    store: AccountStore,
    user_id: str,
    wanted: Mapping[str, Role],
    project_exists: Callable[[str], bool],
    stored: Callable[[WriteOutcome], None],
) -> RoleChanges:
    """Bring a user's ``sso`` memberships in line with ``wanted``; leave ``manual`` ones."""
    current = {m.project: m for m in store.memberships_of_user(user_id)}
    changes = RoleChanges({}, [])
    now = datetime.now(UTC)
    for project, role in wanted.items():
        membership = current.get(project)
        if membership is not None and (membership.role_source != SSO or membership.role == role):
            continue
        if membership is None and not project_exists(project):
            logger.warning("SSO role map names project %r, which does not exist: skipped", project)
            continue
        if membership is not None and _last_owner(store, membership) and role != "owner":
            continue
        created = membership.created_at if membership else now
        stored(store.put_membership(MembershipRow(project, user_id, role, SSO, created)))
        changes.set[project] = role
    for project, membership in current.items():
        if project in wanted or membership.role_source != SSO or _last_owner(store, membership):
            continue
        stored(store.put_membership(membership, removed=True))
        changes.removed.append(project)
    return changes


def _last_owner(store: AccountStore, membership: MembershipRow) -> bool:
    if membership.role != "owner":
        return False
    owners = [m for m in store.members(membership.project) if m.role == "owner"]
    return all(m.user_id == membership.user_id for m in owners)
