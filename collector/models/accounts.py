"""Wire models of accounts: sign-in, users, projects and members (docs/api-notes.md,
"Accounts")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .rows import NoneIfEmpty, RowModel

# Lengths only: the services say what a valid address, password, name or role is, each as a
# 400 naming the field.
Email = Annotated[str, Field(min_length=1, max_length=320)]
Password = Annotated[str, Field(max_length=1024)]
DisplayName = Annotated[str, Field(max_length=200)]


class LoginIn(BaseModel):
    """``POST /v1/auth/login``."""

    model_config = ConfigDict(extra="forbid")

    email: Email
    password: Password


class UserOut(RowModel):
    """A user account; never its password or its hash."""

    id: str = Field(description="usr_<24 hex>")
    email: str
    name: Annotated[str | None, NoneIfEmpty]
    disabled: bool
    instance_admin: bool
    created_at: datetime
    last_login_at: datetime | None


class ProjectRole(BaseModel):
    """One project of the signed-in user and its role there."""

    name: str
    role: str


class SessionOut(BaseModel):
    """``POST /v1/auth/login`` and ``GET /v1/auth/me``: who is signed in, where, and the token
    a write by the session's cookie repeats in ``X-CSRF-Token``."""

    user: UserOut
    projects: list[ProjectRole] = Field(description="The first is the default project.")
    csrf_token: str


class SignedOut(BaseModel):
    """``POST /v1/auth/logout``."""

    signed_out: bool


class ProjectIn(BaseModel):
    """``POST /v1/projects``."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=64)]


class ProjectOut(BaseModel):
    """A project, with the caller's role in it."""

    name: str
    role: str
    created_at: datetime | None = Field(description="null for a project only API keys name")


class AccountIn(BaseModel):
    """``POST /v1/users/accounts``: a user; without a password it signs in only by SSO."""

    model_config = ConfigDict(extra="forbid")

    email: Email
    name: DisplayName | None = None
    password: Password | None = None
    instance_admin: bool = False


class AccountPatch(BaseModel):
    """``PATCH /v1/users/accounts/{email}``: what is given changes; disabling ends the user's
    sessions at once, and so does a new password."""

    model_config = ConfigDict(extra="forbid")

    name: DisplayName | None = None
    password: Password | None = None
    disabled: bool | None = None


class MemberIn(BaseModel):
    """``PUT /v1/projects/{project}/members/{email}``."""

    model_config = ConfigDict(extra="forbid")

    role: Annotated[str, Field(min_length=1, max_length=20)]


class MemberOut(RowModel):
    """A member of a project: who, its role, and whether an admin (``manual``) or the identity
    provider's groups (``sso``) set it."""

    user_id: str
    email: str
    name: Annotated[str | None, NoneIfEmpty]
    role: str
    role_source: str
    added_at: datetime
