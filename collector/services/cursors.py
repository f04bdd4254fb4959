"""Opaque pagination cursors: signed so that a cursor the service did not issue is refused."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any

from ..errors import ValidationFailed

_MAC_BYTES = 12


class CursorCodec:
    """Encode and decode cursors for one kind of list (``prompts``, ``requests``…)."""

    def __init__(self, secret: str, kind: str) -> None:
        self._key = hashlib.sha256(f"{secret}/{kind}".encode()).digest()
        self._kind = kind

    def encode(self, position: dict[str, Any]) -> str:
        """Return the cursor for a position."""
        raw = json.dumps(position, separators=(",", ":"), sort_keys=True).encode()
        mac = hmac.new(self._key, raw, hashlib.sha256).digest()[:_MAC_BYTES]
        return base64.urlsafe_b64encode(raw + mac).decode().rstrip("=")

    def decode(self, cursor: str) -> dict[str, Any]:
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

    def _invalid(self) -> ValidationFailed:
        return ValidationFailed(
            "cursor", f"Invalid cursor: it was not issued for this {self._kind} list"
        )
