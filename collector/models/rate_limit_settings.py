"""Rate limits as the settings write them: ``"20/second;600/minute"``, per project overrides.

Read by the settings (``config.py``) to refuse a bad value at start-up, and by the limits
themselves (``services/rate_limits.py``) to count.
"""

from __future__ import annotations

from limits import RateLimitItem, parse_many
from pydantic import BaseModel, ConfigDict, field_validator


def parse_limit(value: str | None) -> list[RateLimitItem]:
    """Read a limit (``"20/second;600/minute"``); empty or ``none`` is no limit.

    Raises ``ValueError`` naming the notation when the value is not one.
    """
    text = (value or "").strip()
    if not text or text.lower() == "none":
        return []
    try:
        return parse_many(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a limit: write e.g. '20/second', '600 per minute' or "
            "'20/second;600/minute' (empty or 'none' for no limit)"
        ) from None


def check_limit(value: str) -> str:
    """Validate a limit setting (pydantic validator)."""
    parse_limit(value)
    return value


class ProjectLimitOverride(BaseModel):
    """One project's own limits; a kind left out keeps the default, ``""`` lifts it."""

    model_config = ConfigDict(extra="forbid")

    requests: str | None = None
    records: str | None = None
    bytes: str | None = None

    @field_validator("requests", "records", "bytes")
    @classmethod
    def _is_limit(cls, value: str | None) -> str | None:
        return None if value is None else check_limit(value)
