"""Wire shapes of the admin key routes (``promptrail keys ...`` through a running collector)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .envelopes import Data

# The longest grace a rotation may give the old keys: a year.
MAX_GRACE_SECONDS = 365 * 24 * 3600


class KeyCreate(BaseModel):
    """Which project the new key belongs to."""

    project: str = Field(min_length=1, max_length=64)


class KeyCreated(BaseModel):
    """The new key, shown once."""

    project: str
    api_key: str


class KeyOut(BaseModel):
    """One key as a list shows it: its id and stored prefix, never the key or its hash."""

    model_config = ConfigDict(from_attributes=True)  # made from the service's KeyInfo

    key_id: str
    project: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    status: Literal["active", "expiring", "revoked"]
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
