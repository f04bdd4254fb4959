"""Request bodies: refuse those over the limit, and inflate gzip and zstd ones (bounded)."""

from __future__ import annotations

import json
import zlib

import zstandard
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ContractError, PayloadTooLarge, ValidationFailed

# The request codings the collector inflates, as its responses say (RFC 7694): the SDK posts
# zstd to a collector that names it, gzip to one that does not (docs/api-notes.md).
_CODINGS = (b"gzip", b"zstd")
_ACCEPTED = (b"accept-encoding", b"gzip, zstd")


class BodyLimitMiddleware:
    """Answer 413 PAYLOAD_TOO_LARGE for bodies over ``max_bytes``; inflate gzip and zstd
    bodies.

    A declared Content-Length is checked up front (the server holds the body to it). A chunked
    or compressed body is read here, up to the limit, and replayed to the app; a compressed
    body's inflated size is held to the same limit, so a small bomb cannot blow up memory.
    Every response names the codings taken (``Accept-Encoding``).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _naming_codings(send)
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _reject(send, PayloadTooLarge(self.max_bytes))
            return
        coding = headers.get(b"content-encoding", b"").strip().lower()
        coded = coding in _CODINGS
        if declared is not None and not coded:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read(receive)
            if coding == b"gzip":
                body = self._inflate(body)
            elif coded:
                body = self._unzstd(body)
        except ContractError as exc:
            await _reject(send, exc)
            return
        if coded:
            scope = dict(scope)
            scope["headers"] = [
                (k, v)
                for k, v in scope["headers"]
                if k not in (b"content-encoding", b"content-length")
            ] + [(b"content-length", str(len(body)).encode())]
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise PayloadTooLarge(self.max_bytes)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _inflate(self, body: bytes) -> bytes:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            data = inflater.decompress(body, self.max_bytes + 1)
        except zlib.error:
            raise ValidationFailed("body", "Content-Encoding is gzip but the body is not") from None
        if len(data) > self.max_bytes or inflater.unconsumed_tail:
            raise PayloadTooLarge(self.max_bytes)
        return data

    def _unzstd(self, body: bytes) -> bytes:
        """Decompress a zstd body of one or more frames, none past the limit in all.

        A frame states its size up front (the SDK's do) or is measured by a bounded read
        first: a bomb is never decompressed past ``max_bytes``. zstd checks the stated size
        against what comes out; a cut or corrupt frame is a 400, as a bad gzip body is.
        """
        decompressor = zstandard.ZstdDecompressor()
        pieces: list[bytes] = []
        room = self.max_bytes
        rest = body
        try:
            while rest:
                size = zstandard.frame_content_size(rest)
                if size < 0:  # not stated: read at most one byte past the room left
                    size = len(decompressor.stream_reader(rest).read(room + 1))
                if size > room:
                    raise PayloadTooLarge(self.max_bytes)
                # One output buffer for the frame: one call into zstd, not one per 128 KiB.
                frame = decompressor.decompressobj(write_size=max(size, 1))
                piece = frame.decompress(rest)
                if not frame.eof or len(piece) > room:
                    raise zstandard.ZstdError("a cut frame")
                pieces.append(piece)
                room -= len(piece)
                rest = frame.unused_data
        except zstandard.ZstdError:
            raise ValidationFailed("body", "Content-Encoding is zstd but the body is not") from None
        return b"".join(pieces)


def _naming_codings(send: Send) -> Send:
    async def naming(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), _ACCEPTED]}
        await send(message)

    return naming


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _reject(send: Send, error: ContractError) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
