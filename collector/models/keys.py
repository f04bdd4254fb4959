"""Wire shapes of the admin key routes (``promptrail keys ...`` through a running collector)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..access.principal import Scope
from .envelopes import Data

# The longest grace a rotation may give the old keys: a year.
MAX_GRACE_SECONDS = 365 * 24 * 3600
# The longest a key may be made to last before it expires: ten years.
MAX_EXPIRES_SECONDS = 10 * 365 * 24 * 3600

_DURATION = re.compile(r"\s*([0-9]{1,12})\s*([smhd]?)\s*")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | int) -> int:
    """Seconds of ``90d``, ``12h``, ``30m``, ``45s`` or a plain number of seconds.

    Raise ValueError (a 400 naming the field, in a body) for anything else, or a duration
    that is not 1 second to ten years.
    """
    if isinstance(value, bool):
        raise ValueError("expires_in must be a duration such as 90d, 12h, 30m or 45s")
    if isinstance(value, int):
        seconds = value
    else:
        match = _DURATION.fullmatch(value)
        if match is None:
            raise ValueError("expires_in must be a duration such as 90d, 12h, 30m or 45s")
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not 1 <= seconds <= MAX_EXPIRES_SECONDS:
        raise ValueError("expires_in must be 1 second to 3650 days")
    return seconds


class KeyCreate(BaseModel):
    """Which project the new key belongs to (the admin route of ``promptrail keys create``)."""

    project: str = Field(min_length=1, max_length=64)
    scopes: list[Scope] | None = Field(
        default=None, min_length=1, description="What the key may do; omitted: every scope."
    )
    expires_in: int | None = Field(default=None, ge=1, le=MAX_EXPIRES_SECONDS)
    name: str | None = Field(default=None, max_length=64)


class NewKey(BaseModel):
    """``POST /v1/keys``: a key of the caller's project (docs/api-notes.md, "Keys and scopes")."""

    model_config = ConfigDict(extra="forbid")

    scopes: list[Scope] = Field(min_length=1, max_length=5)
    expires_in: int | str | None = Field(
        default=None, description="Seconds, or a number with a unit: 90d, 12h, 30m, 45s."
    )
    name: str | None = Field(default=None, max_length=64)

    @field_validator("expires_in")
    @classmethod
    def _duration(cls, value: int | str | None) -> int | None:
        return None if value is None else parse_duration(value)


class KeyCreated(BaseModel):
    """The new key, shown once, and what it may do."""

    project: str
    api_key: str
    key_id: str | None = None
    scopes: list[Scope] = Field(default_factory=list)
    expires_at: datetime | None = None
    name: str = ""


class KeyOut(BaseModel):
    """One key as a list shows it: its id and stored prefix, never the key or its hash."""

    model_config = ConfigDict(from_attributes=True)  # made from the service's KeyInfo

    key_id: str
    project: str
    prefix: str
    name: str = ""
    scopes: list[Scope]
    created_at: datetime
    created_by: str = Field(
        description="Who made it: a user's e-mail, a key's id, 'cli' or 'start-up' (the "
        "development key); '' for a key made before keys said."
    )
    last_used_at: datetime | None
    expires_at: datetime | None
    status: Literal["active", "expiring", "revoked", "expired"]
    revoked_at: datetime | None = Field(
        description="When the key stops (expiring) or stopped (revoked) working."
    )


class KeyRevoke(BaseModel):
    """The key to revoke: its id (``key_…``) or the key itself (in the body, never a URL)."""

    key: str = Field(min_length=1, max_length=512)


class KeyRotate(BaseModel):
    """The project whose keys to rotate, and how long its old keys keep working."""

    project: str = Field(min_length=1, max_length=64)
    grace_seconds: int = Field(default=0, ge=0, le=MAX_GRACE_SECONDS)


class KeyRotated(BaseModel):
    """The new key (shown once) and the old keys, now revoked or expiring."""

    model_config = ConfigDict(from_attributes=True)  # made from the service's RotatedKeys

    project: str
    api_key: str
    key_id: str
    revoked: list[KeyOut]


# The envelopes the admin routes answer with, and the CLI prints as they do.
KeyCreatedData = Data[KeyCreated]
KeyList = Data[list[KeyOut]]
KeyData = Data[KeyOut]
KeyRotatedData = Data[KeyRotated]
