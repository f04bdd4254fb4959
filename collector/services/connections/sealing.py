"""Sealing connections' secrets: AES-GCM (the ``cryptography`` package) under one 32-byte key.

The key is ``PROMPTRAIL_SECRET_KEY`` (base64), or on the embedded store without it a key file
made in the data dir with mode 0600 (:func:`load_keys`). A sealed value is bound to its
project and connection name (the associated data): a sealed value copied onto another
connection does not open. Keys given in ``PROMPTRAIL_SECRET_KEY_PREVIOUS`` still open what they
sealed, so that a rotation can re-seal every connection under the new key
(docs/security.md, Connections).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...config import Settings

KEY_FILE_NAME = "connections.key"
_NONCE_BYTES = 12


class SealBroken(Exception):
    """A sealed value that no known key opens (the key changed, or the value was altered)."""


@dataclass(frozen=True)
class KeySource:
    """The sealing key, where it came from (said at start-up), and the previous keys."""

    key: bytes
    origin: str
    key_file: Path | None = None
    previous: tuple[bytes, ...] = ()


def key_id(key: bytes) -> str:
    """Return a short public name of a key (a hash prefix: it tells nothing of the key)."""
    return hashlib.sha256(b"promptrail-connections\0" + key).hexdigest()[:16]


def _decode(text: str) -> bytes:
    return base64.b64decode(text.strip(), validate=True)


def load_keys(settings: Settings) -> KeySource | None:
    """Return the sealing key: ``PROMPTRAIL_SECRET_KEY``, else (embedded store) the data dir's
    key file, made with mode 0600 on first use; None on a server store without a key."""
    previous = tuple(
        _decode(k)
        for k in (
            settings.secret_key_previous.get_secret_value().split(",")
            if settings.secret_key_previous
            else []
        )
        if k.strip()
    )
    if settings.secret_key is not None:
        return KeySource(
            _decode(settings.secret_key.get_secret_value()),
            "PROMPTRAIL_SECRET_KEY",
            previous=previous,
        )
    if not settings.is_embedded:
        return None
    path = (settings.data_dir / KEY_FILE_NAME).resolve()
    return KeySource(_key_file(path), str(path), path, previous)


def _read_key_file(path: Path) -> bytes:
    try:
        key = _decode(path.read_text())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError(f"{path} is not a key: 32 bytes in base64 expected")
    return key


def _key_file(path: Path) -> bytes:
    """Read the key file, or make it: created 0600 (never readable by others, whatever the
    umask), the key written once."""
    try:
        return _read_key_file(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = AESGCM.generate_key(bit_length=256)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another collector of this process made it first: use theirs.
        return _read_key_file(path)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, base64.b64encode(key) + b"\n")
    finally:
        os.close(fd)
    return key


class Sealer:
    """Seal and open secrets under the current key; open with the previous ones too."""

    def __init__(self, key: bytes, previous: Sequence[bytes] = ()) -> None:
        self.key_id = key_id(key)
        self._current = AESGCM(key)
        self._keys = {self.key_id: self._current} | {key_id(k): AESGCM(k) for k in previous}

    def seal(self, plaintext: bytes, context: str) -> str:
        """Return ``plaintext`` sealed (base64 of nonce and ciphertext), bound to ``context``."""
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._current.encrypt(nonce, plaintext, context.encode())
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, sealed_key_id: str, context: str) -> bytes:
        """Return the plaintext of a sealed value, or raise :class:`SealBroken`."""
        aead = self._keys.get(sealed_key_id)
        if aead is None:
            raise SealBroken("sealed under a key this collector does not have")
        try:
            raw = base64.b64decode(sealed)
            return aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode())
        except (InvalidTag, ValueError):
            raise SealBroken("the sealed value does not open under its key") from None


def seal_context(project: str, name: str) -> str:
    """The associated data a connection's secrets are sealed with."""
    return f"promptrail-connection\0{project}\0{name}"
