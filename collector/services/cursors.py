"""Opaque pagination cursors: signed so that a cursor the service did not issue is refused.

One codec per kind of list. A list reads its position with :meth:`CursorCodec.after` (the
common time-and-key keyset: :meth:`CursorCodec.after_time`) and cuts its page with
:meth:`CursorCodec.next_page`; any cursor it did not issue, or one whose position does not
have the list's shape, is the same 400 VALIDATION_ERROR naming ``cursor``
(docs/api-notes.md, "Pagination").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from ..errors import ValidationFailed

_MAC_BYTES = 12

T = TypeVar("T")
R = TypeVar("R")

Position = dict[str, Any]


def time_key(at: datetime, key: str) -> Position:
    """The position of a row in a list ordered by (time, key): what :meth:`after_time` reads."""
    return {"at": at.isoformat(), "id": key}


def _read_time_key(position: Position) -> tuple[datetime, str]:
    return datetime.fromisoformat(position["at"]), str(position["id"])


class CursorCodec:
    """Encode and decode cursors for one kind of list (``prompts``, ``requests``…)."""

    def __init__(self, secret: str, kind: str) -> None:
        self._key = hashlib.sha256(f"{secret}/{kind}".encode()).digest()
        self._kind = kind

    def encode(self, position: Position) -> str:
        """Return the cursor for a position."""
        raw = json.dumps(position, separators=(",", ":"), sort_keys=True).encode()
        mac = hmac.new(self._key, raw, hashlib.sha256).digest()[:_MAC_BYTES]
        return base64.urlsafe_b64encode(raw + mac).decode().rstrip("=")

    def decode(self, cursor: str) -> Position:
        """Return the position of a cursor this codec issued, or raise VALIDATION_ERROR."""
        try:
            blob = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            raise self._invalid() from None
        raw, mac = blob[:-_MAC_BYTES], blob[-_MAC_BYTES:]
        expected = hmac.new(self._key, raw, hashlib.sha256).digest()[:_MAC_BYTES]
        if len(blob) <= _MAC_BYTES or not hmac.compare_digest(mac, expected):
            raise self._invalid()
        try:
            position = json.loads(raw)
        except ValueError:  # UnicodeDecodeError is one
            raise self._invalid() from None
        if not isinstance(position, dict):
            raise self._invalid()
        return position

    def after(self, cursor: str | None, read: Callable[[Position], T]) -> T | None:
        """Return ``read`` of the cursor's position (None without a cursor).

        ``read`` raises KeyError, TypeError or ValueError for a position not of the list's
        shape: that cursor is refused as one the codec did not issue.
        """
        if not cursor:
            return None
        position = self.decode(cursor)
        try:
            return read(position)
        except (KeyError, TypeError, ValueError):
            raise self._invalid() from None

    def after_time(self, cursor: str | None) -> tuple[datetime, str] | None:
        """Return the (time, key) a cursor of :func:`time_key` names (None without one)."""
        return self.after(cursor, _read_time_key)

    def next_page(
        self, rows: Sequence[R], limit: int, position: Callable[[R], Position]
    ) -> tuple[list[R], str | None]:
        """Cut a page from ``rows`` read with ``limit + 1``: the page, and the cursor after its
        last row when there are more (None on the last page)."""
        if len(rows) <= limit:
            return list(rows), None
        page = list(rows[:limit])
        return page, self.encode(position(page[-1]))

    def _invalid(self) -> ValidationFailed:
        return ValidationFailed(
            "cursor", f"Invalid cursor: it was not issued for this {self._kind} list"
        )
