"""Dates from query strings and bodies: ISO 8601 or date-only, always UTC."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from ..errors import ValidationFailed


def parse_date(value: str, field: str, end_of_day: bool = False) -> datetime:
    """Parse an ISO 8601 timestamp or a ``YYYY-MM-DD`` date (start, or end, of that day)."""
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            moment = datetime.combine(day, time.min, tzinfo=UTC)
            return moment + timedelta(days=1, milliseconds=-1) if end_of_day else moment
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        raise ValidationFailed(
            field, f"{field} must be an ISO 8601 timestamp or a YYYY-MM-DD date", value=value
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def utc_now_ms() -> datetime:
    """Return now, in UTC, at the millisecond precision the tables store."""
    return to_ms(datetime.now(UTC))


def to_ms(at: datetime) -> datetime:
    """Return ``at`` cut to the millisecond precision the tables store (DateTime64(3))."""
    return at.replace(microsecond=at.microsecond // 1000 * 1000)
