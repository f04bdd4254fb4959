"""Request bodies: refuse those over the limit, and inflate gzip ones (bounded)."""

from __future__ import annotations

import json
import zlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ContractError, PayloadTooLarge, ValidationFailed


class BodyLimitMiddleware:
    """Answer 413 PAYLOAD_TOO_LARGE for bodies over ``max_bytes``; inflate gzip bodies.

    A declared Content-Length is checked up front (the server holds the body to it). A chunked
    or gzip body is read here, up to the limit, and replayed to the app; a gzip body's
    inflated size is held to the same limit, so a small bomb cannot blow up memory.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _reject(send, PayloadTooLarge(self.max_bytes))
            return
        gzipped = headers.get(b"content-encoding", b"").strip().lower() == b"gzip"
        if declared is not None and not gzipped:
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read(receive)
            if gzipped:
                body = self._inflate(body)
        except ContractError as exc:
            await _reject(send, exc)
            return
        if gzipped:
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
