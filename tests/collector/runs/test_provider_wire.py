"""The provider clients on the wire: any line ending an event stream may use, a kept-alive
connection the provider closed while it was idle, and a provider served over TLS."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.types import Receive, Scope, Send

from promptrail.collector.providers import (
    ChatMessage,
    CompletionRequest,
    HttpPolicy,
    ProviderEndpoint,
    ProviderFailure,
    StreamEnd,
    TextDelta,
    _http,
)
from promptrail.collector.providers.openai import OpenAIProvider
from promptrail.testing import serve

REQUEST = CompletionRequest("gpt-4o-mini", (ChatMessage("user", "Hi"),))
WORDS = ["Héllo", " wörld", ", ", "again"]


def _events(end: bytes) -> bytes:
    """An OpenAI stream (a role chunk, the words, the finish, the usage, ``[DONE]``), its
    lines ended by ``end``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    payloads: list[Any] = [chunk({"role": "assistant", "content": ""})]
    payloads += [chunk({"content": word}) for word in WORDS]
    payloads.append(chunk({}, "stop"))
    payloads.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    lines: list[bytes] = [b": a comment"]
    for payload in payloads:
        lines += [b"data: " + json.dumps(payload, ensure_ascii=False).encode(), b""]
    lines += [b"data: [DONE]", b""]
    return b"".join(line + end for line in lines)


class _Sender:
    """An ASGI app answering every call with ``body``, sent in pieces of ``size`` bytes (so
    that line ends and multi-byte characters fall across the client's reads)."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body = body
        self.size = size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for at in range(0, len(self.body), self.size):
            piece = self.body[at : at + self.size]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(0.001)
        await send({"type": "http.response.body", "body": b""})


async def _stream(url: str, policy: HttpPolicy) -> tuple[str, StreamEnd]:
    provider = OpenAIProvider(ProviderEndpoint(url, "sk-test"), policy)
    try:
        return await _read(provider)
    finally:
        await provider.aclose()


async def _read(provider: OpenAIProvider) -> tuple[str, StreamEnd]:
    text, end = "", None
    async for event in provider.stream(REQUEST):
        if isinstance(event, TextDelta):
            text += event.content
        else:
            end = event
    assert end is not None
    return text, end


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("size", [1, 7, 4096])
def test_a_stream_reads_the_same_whatever_its_line_ends_and_reads(end: bytes, size: int) -> None:
    # Servers built on sse-starlette end their lines with CRLF; the event-stream format also
    # allows a lone CR. Pieces of 1 and 7 bytes split CRLF pairs and UTF-8 characters.
    with serve(_Sender(_events(end), size), lifespan="off") as url:
        text, finished = asyncio.run(_stream(url, HttpPolicy()))
    assert text == "".join(WORDS)
    assert finished.finish_reason == "stop"
    assert (finished.usage.prompt_tokens, finished.usage.completion_tokens) == (3, 4)


@pytest.fixture
def closing_server() -> Iterator[tuple[str, list[int]]]:
    """A raw HTTP/1.1 server that answers one stream per connection, keep-alive in its
    headers, then closes the connection: its base URL and the connections it took."""
    body = _events(b"\n")
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"content-length: %d\r\nconnection: keep-alive\r\n\r\n%s" % (len(body), body)
    )
    accepted: list[int] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("peername")[1])
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(answer)
        await writer.drain()
        writer.close()

    def run() -> None:
        server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{port[0]}", accepted
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)


def test_a_connection_the_provider_closed_while_idle_is_not_used_again(
    closing_server: tuple[str, list[int]],
) -> None:
    # Without retries: a call sent on the closed connection would fail. The pool sees the
    # connection's end before it hands the connection out, and opens a new one.
    url, accepted = closing_server

    async def twice() -> list[str]:
        provider = OpenAIProvider(ProviderEndpoint(url, "sk-test"), HttpPolicy(max_retries=0))
        try:
            first, _ = await _read(provider)
            # The server closed its side once the first answer was sent; give its end of
            # stream a moment to arrive before the second call looks at the pool.
            await asyncio.sleep(0.05)
            second, _ = await _read(provider)
            return [first, second]
        finally:
            await provider.aclose()

    assert asyncio.run(twice()) == ["".join(WORDS)] * 2
    assert len(accepted) == 2 and accepted[0] != accepted[1]


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_provider(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An OpenAI stream served over TLS: its base URL and its certificate."""
    cert_path, key_path = _certificate(tmp_path)
    config = uvicorn.Config(
        _Sender(_events(b"\n"), 4096),
        host="127.0.0.1",
        port=0,
        lifespan="off",
        log_level="warning",
        ssl_certfile=str(cert_path),
        ssl_keyfile=str(key_path),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started or not thread.is_alive():
            break
        threading.Event().wait(0.01)
    assert server.started, "the TLS server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"https://127.0.0.1:{port}", cert_path
    server.should_exit = True
    thread.join(timeout=15)


def test_a_provider_served_over_tls_streams_on_one_verified_connection(
    tls_provider: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real providers are all behind TLS: the handshake, the certificate check and the reads
    # of an encrypted stream go through the collector's own connection pool.
    url, cert_path = tls_provider
    trusted = ssl.create_default_context(cafile=str(cert_path))
    monkeypatch.setattr(_http, "_tls_context", lambda: trusted)

    async def twice() -> tuple[list[str], int]:
        provider = OpenAIProvider(ProviderEndpoint(url, "sk-test"), HttpPolicy(max_retries=0))
        try:
            texts = [(await _read(provider))[0] for _ in range(2)]
            return texts, len(provider._client._transport._pool.connections)  # type: ignore[attr-defined]
        finally:
            await provider.aclose()

    texts, connections = asyncio.run(twice())
    assert texts == ["".join(WORDS)] * 2
    assert connections == 1


def test_a_provider_whose_certificate_is_not_trusted_is_not_called(
    tls_provider: tuple[str, Path],
) -> None:
    url, _ = tls_provider

    async def once() -> None:
        provider = OpenAIProvider(ProviderEndpoint(url, "sk-test"), HttpPolicy(max_retries=0))
        try:
            await _read(provider)
        finally:
            await provider.aclose()

    with pytest.raises(ProviderFailure, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(once())
