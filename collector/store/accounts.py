"""Accounts (docs/security.md, "Accounts"): users, projects, memberships and sign-in sessions.

Every table is only ever inserted into: a change is a newer row of the same key (the newest
``updated_at`` wins), a removal a newer row with ``is_deleted = 1``; reads use ``FINAL``,
which keeps each key's newest row. The tables are small (people, not records), so a read
that filters on a column outside the sort key (a user's memberships, a user's sessions)
reads the whole table at a negligible cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from clickhouse_connect.driver.client import Client

from .schema import Table, quote
from .writes import WriteOutcome, direct_write

# One row per e-mail address: the sort key is the lower-cased address, so two users can never
# share one (case-insensitively) once the replacing merge has run, and every read by e-mail is
# a primary-key lookup. A user's id never changes.
USERS = Table(
    name="users",
    columns=(
        "email_key String",
        "id String",
        "email String",
        "name String",
        "password_hash String",  # Argon2id in PHC form; '' for a user without a password
        "disabled UInt8",
        "instance_admin UInt8",
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="email_key",
)

# When each user last signed in: a row of its own, never an update of the user's row, so a
# sign-in racing an admin's change (a disable) can never write the user back as it was.
USER_LOGINS = Table(
    name="user_logins",
    columns=("user_id String", "last_login_at DateTime64(3, 'UTC')"),
    engine="ReplacingMergeTree",
    engine_args=("last_login_at",),
    order_by="user_id",
)

# The projects made by an instance admin. Projects named only by API keys (those made before
# accounts existed) are not listed here; the accounts service counts both.
PROJECTS = Table(
    name="projects",
    columns=(
        "project String",
        "created_at DateTime64(3, 'UTC')",
        "created_by String",
    ),
    engine="ReplacingMergeTree",
    order_by="project",
)

MEMBERSHIPS = Table(
    name="memberships",
    columns=(
        "project String",
        "user_id String",
        "role LowCardinality(String)",
        "role_source LowCardinality(String)",  # 'sso' | 'manual'
        "created_at DateTime64(3, 'UTC')",  # kept when the role changes: a user's project order
        "updated_at DateTime64(6, 'UTC')",
        "is_deleted UInt8",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at", "is_deleted"),
    order_by="(project, user_id)",
)

# Sign-in sessions by the SHA-256 of their token (the token itself is only in the cookie).
# Sign-out stores a newer row with ``revoked = 1``.
AUTH_SESSIONS = Table(
    name="auth_sessions",
    columns=(
        "token_hash String",
        "user_id String",
        "csrf_token String",
        "created_at DateTime64(3, 'UTC')",
        "expires_at DateTime64(3, 'UTC')",
        "revoked UInt8",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="token_hash",
)

ACCOUNT_TABLES = (USERS, USER_LOGINS, PROJECTS, MEMBERSHIPS, AUTH_SESSIONS)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(milliseconds: Any) -> datetime | None:
    return None if milliseconds is None else _EPOCH + timedelta(milliseconds=int(milliseconds))


@dataclass(frozen=True)
class UserRow:
    """One user as stored (the password hash never leaves the service)."""

    id: str
    email: str
    name: str
    password_hash: str
    disabled: bool
    instance_admin: bool
    created_at: datetime
    last_login_at: datetime | None = None


@dataclass(frozen=True)
class ProjectRow:
    """One registered project."""

    name: str
    created_at: datetime
    created_by: str


@dataclass(frozen=True)
class MembershipRow:
    """A user's role in one project."""

    project: str
    user_id: str
    role: str
    role_source: str
    created_at: datetime


@dataclass(frozen=True)
class SessionRow:
    """One sign-in session."""

    token_hash: str
    user_id: str
    csrf_token: str
    created_at: datetime
    expires_at: datetime
    revoked: bool


_USER_SELECT = (
    "SELECT u.id, u.email, u.name, u.password_hash, u.disabled, u.instance_admin, "
    "toUnixTimestamp64Milli(u.created_at), toUnixTimestamp64Milli(l.at) "
)
_MEMBER_SELECT = "SELECT project, user_id, role, role_source, toUnixTimestamp64Milli(created_at) "


class AccountStore:
    """Reads and writes ``users``, ``user_logins``, ``projects``, ``memberships`` and
    ``auth_sessions``.

    Every write answers :data:`~.writes.STORED`, or :class:`~.writes.Refused` on a store
    outage (the service answers its 503); a refused write stored nothing, and a retry is safe.
    """

    def __init__(self, client: Client, database: str, cluster: str | None = None) -> None:
        self._client = client
        db = quote(database)
        self._users = f"{db}.{quote(USERS.name)}"
        self._logins = f"{db}.{quote(USER_LOGINS.name)}"
        self._projects = f"{db}.{quote(PROJECTS.name)}"
        self._members = f"{db}.{quote(MEMBERSHIPS.name)}"
        self._sessions = f"{db}.{quote(AUTH_SESSIONS.name)}"
        # On a cluster a sign-out or a role change must be seen by the next read whichever
        # replica answers it (as for key revocations, store/keys.py).
        self._write: dict[str, Any] = {"insert_quorum": "auto"} if cluster else {}
        self._read: dict[str, Any] = {"select_sequential_consistency": 1} if cluster else {}

    # -- users -----------------------------------------------------------------------------

    def put_user(self, row: UserRow) -> WriteOutcome:
        """Store a user (a new version of its e-mail's row)."""
        values = [
            row.email.lower(),
            row.id,
            row.email,
            row.name,
            row.password_hash,
            int(row.disabled),
            int(row.instance_admin),
            row.created_at,
            datetime.now(UTC),
        ]
        return direct_write(lambda: self._insert(self._users, USERS, [values]))

    def user_by_email(self, email: str) -> UserRow | None:
        """Return the user with this e-mail address (any case), or None."""
        rows = self._users_where("u.email_key = {key:String}", key=email.lower())
        return rows[0] if rows else None

    def user_by_id(self, user_id: str) -> UserRow | None:
        """Return the user with this id, or None."""
        rows = self._users_where("u.id = {id:String}", id=user_id)
        return rows[0] if rows else None

    def users_by_id(self, ids: Sequence[str]) -> dict[str, UserRow]:
        """Return the users with these ids, by id."""
        if not ids:
            return {}
        rows = self._users_where("has({ids:Array(String)}, u.id)", ids=list(ids))
        return {row.id: row for row in rows}

    def users(self) -> list[UserRow]:
        """Return every user, oldest first."""
        return self._users_where("1")

    def has_users(self) -> bool:
        """Return whether any user exists."""
        rows = self._client.query(f"SELECT count() FROM {self._users}").result_rows
        return int(rows[0][0]) > 0

    def record_login(self, user_id: str, at: datetime) -> WriteOutcome:
        """Store that a user signed in at ``at``."""
        return direct_write(lambda: self._insert(self._logins, USER_LOGINS, [[user_id, at]]))

    def _users_where(self, where: str, **params: Any) -> list[UserRow]:
        rows = self._client.query(
            _USER_SELECT + f"FROM {self._users} AS u FINAL "
            f"LEFT JOIN (SELECT user_id, maxOrNull(last_login_at) AS at FROM {self._logins} "
            "GROUP BY user_id) AS l ON l.user_id = u.id "
            f"WHERE {where} ORDER BY u.created_at, u.id",
            parameters=params,
            settings=self._read,
        ).result_rows
        return [
            UserRow(
                id=str(r[0]),
                email=str(r[1]),
                name=str(r[2]),
                password_hash=str(r[3]),
                disabled=bool(r[4]),
                instance_admin=bool(r[5]),
                created_at=_time(r[6]) or _EPOCH,
                last_login_at=_time(r[7]),
            )
            for r in rows
        ]

    # -- projects --------------------------------------------------------------------------

    def put_project(self, row: ProjectRow) -> WriteOutcome:
        """Register a project."""
        values = [row.name, row.created_at, row.created_by]
        return direct_write(lambda: self._insert(self._projects, PROJECTS, [values]))

    def project(self, name: str) -> ProjectRow | None:
        """Return the registered project of this name, or None."""
        rows = self._client.query(
            "SELECT project, toUnixTimestamp64Milli(created_at), created_by "
            f"FROM {self._projects} FINAL WHERE project = {{p:String}}",
            parameters={"p": name},
            settings=self._read,
        ).result_rows
        if not rows:
            return None
        return ProjectRow(str(rows[0][0]), _time(rows[0][1]) or _EPOCH, str(rows[0][2]))

    # -- memberships -----------------------------------------------------------------------

    def put_membership(self, row: MembershipRow, removed: bool = False) -> WriteOutcome:
        """Store a user's role in a project; ``removed`` stores its removal."""
        values = [
            row.project,
            row.user_id,
            row.role,
            row.role_source,
            row.created_at,
            datetime.now(UTC),
            int(removed),
        ]
        return direct_write(lambda: self._insert(self._members, MEMBERSHIPS, [values]))

    def memberships_of_user(self, user_id: str) -> list[MembershipRow]:
        """Return a user's memberships in the order they were made (the first: the default)."""
        return self._members_where(
            "user_id = {u:String}", "ORDER BY created_at, project", u=user_id
        )

    def members(self, project: str) -> list[MembershipRow]:
        """Return the memberships of a project, oldest first."""
        return self._members_where(
            "project = {p:String}", "ORDER BY created_at, user_id", p=project
        )

    def membership(self, project: str, user_id: str) -> MembershipRow | None:
        """Return a user's membership of a project, or None."""
        rows = self._members_where(
            "project = {p:String} AND user_id = {u:String}", "", p=project, u=user_id
        )
        return rows[0] if rows else None

    def has_members(self, project: str) -> bool:
        """Return whether a project has any member."""
        return bool(self._members_where("project = {p:String}", "LIMIT 1", p=project))

    def _members_where(self, where: str, tail: str, **params: Any) -> list[MembershipRow]:
        rows = self._client.query(
            _MEMBER_SELECT + f"FROM {self._members} FINAL WHERE {where} {tail}",
            parameters=params,
            settings=self._read,
        ).result_rows
        return [
            MembershipRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), _time(r[4]) or _EPOCH)
            for r in rows
        ]

    # -- sessions --------------------------------------------------------------------------

    def put_session(self, row: SessionRow) -> WriteOutcome:
        """Store a new session."""
        values = [
            row.token_hash,
            row.user_id,
            row.csrf_token,
            row.created_at,
            row.expires_at,
            int(row.revoked),
            datetime.now(UTC),
        ]
        return direct_write(lambda: self._insert(self._sessions, AUTH_SESSIONS, [values]))

    def session(self, token_hash: str) -> SessionRow | None:
        """Return the session with this token hash (ended ones too), or None."""
        rows = self._client.query(
            "SELECT token_hash, user_id, csrf_token, toUnixTimestamp64Milli(created_at), "
            f"toUnixTimestamp64Milli(expires_at), revoked FROM {self._sessions} FINAL "
            "WHERE token_hash = {h:String}",
            parameters={"h": token_hash},
            settings=self._read,
        ).result_rows
        if not rows:
            return None
        r = rows[0]
        return SessionRow(
            str(r[0]),
            str(r[1]),
            str(r[2]),
            _time(r[3]) or _EPOCH,
            _time(r[4]) or _EPOCH,
            bool(r[5]),
        )

    def revoke_sessions(self, *, token_hash: str = "", user_id: str = "") -> WriteOutcome:
        """End one session (by token hash) or every live session of a user."""
        where = "token_hash = {h:String}" if token_hash else "user_id = {u:String}"
        statement = (
            f"INSERT INTO {self._sessions} (token_hash, user_id, csrf_token, created_at, "
            "expires_at, revoked, updated_at) SELECT token_hash, user_id, csrf_token, "
            f"created_at, expires_at, 1, now64(6) FROM {self._sessions} FINAL "
            f"WHERE revoked = 0 AND {where}"
        )
        return direct_write(
            lambda: self._client.command(
                statement,
                parameters={"h": token_hash, "u": user_id},
                settings={**self._write, **self._read},
            )
        )

    def _insert(self, table: str, definition: Table, rows: list[list[Any]]) -> None:
        names = definition.inserted_columns()
        self._client.insert(
            table,
            rows,
            column_names=names,
            column_type_names=definition.column_types(names),
            settings=self._write,
        )
