"""The frames both journals write (the registry's, ``journal.py``, and the request log's,
``log_journal.py``): ``length (4 bytes) | CRC-32 (4 bytes) | payload``.

A process killed in the middle of an append leaves a torn last frame; reading a file stops at
the first frame that is not whole or whose checksum does not match (it was never
acknowledged: writers answer only after their append returned).
"""

from __future__ import annotations

import struct
import zlib

_HEADER = struct.Struct(">II")


def frame(kind: bytes, data: bytes) -> list[bytes]:
    """One frame as the file holds it, in pieces for one ``writev``: header, kind, data (the
    payload is ``kind + data``; ``kind`` may be empty)."""
    return [_HEADER.pack(len(kind) + len(data), zlib.crc32(data, zlib.crc32(kind))), kind, data]


def read_frames(data: bytes) -> tuple[list[memoryview], int]:
    """The payloads of the whole frames at the start of a journal file, and where they end
    (what follows was torn or corrupt)."""
    view = memoryview(data)
    frames: list[memoryview] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, checksum = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = view[start : start + length]
        if len(payload) < length or zlib.crc32(payload) != checksum:
            break
        frames.append(payload)
        offset = start + length
    return frames, offset
