"""The connection pool of the provider clients: httpcore's own, over a network backend made
for the collector's event loop (docs/benchmarks.md, "Playground").

Before every request (and again when a response is closed) httpcore's pool asks each idle
connection whether its server closed it, through ``get_extra_info("is_readable")``. Over
httpcore's anyio streams that question builds the socket's whole attribute table (a
``getpeername`` system call among them) before it polls the socket: a fifth of the event
loop's time of a streamed call when eight run at once. The streams here keep their socket and
only poll it, and time their reads and writes with asyncio's own timeouts. Connecting and TLS
are anyio's, as in httpcore.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import anyio
import anyio.abc
import anyio.streams.tls
import httpcore
import httpx

# httpcore's socket option type: (level, option, value).
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


def readable(sock: socket.socket | None) -> bool:
    """Whether a read of ``sock`` would not wait: data, or the end its server closed.

    A socket that is gone counts as readable (its next read is the end), as in httpcore.
    """
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class _Stream(httpcore.AsyncNetworkStream):
    """A connection: anyio's byte stream, with asyncio's own timeouts and the socket kept.

    httpcore's anyio streams wrap each read and write in two context managers (anyio's
    ``fail_after`` cancel scope and an exception map): about a tenth of a streamed call's
    time on the event loop. The collector serves on asyncio, whose ``asyncio.timeout`` does
    the same job for less; the errors are httpcore's, as before.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = stream.extra(
            anyio.abc.SocketAttribute.raw_socket, None
        )

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._stream.receive(max_bytes)
        except anyio.EndOfStream:
            return b""
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpcore.ReadError(exc) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._stream.send(buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpcore.WriteError(exc) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                wrapped = await anyio.streams.tls.TLSStream.wrap(
                    self._stream,
                    ssl_context=ssl_context,
                    hostname=server_hostname,
                    standard_compatible=False,
                    server_side=False,
                )
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(exc) from exc
        except (anyio.BrokenResourceError, anyio.EndOfStream, ssl.SSLError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(exc) from exc
        except Exception:
            await self.aclose()
            raise
        return _Stream(wrapped)

    def get_extra_info(self, info: str) -> Any:
        # As httpcore's anyio streams answer, "is_readable" without building the socket's
        # whole attribute table.
        if info == "is_readable":
            return readable(self._socket)
        if info == "socket":
            return self._socket
        if info == "ssl_object":
            return self._stream.extra(anyio.streams.tls.TLSAttribute.ssl_object, None)
        if info == "client_addr":
            return self._stream.extra(anyio.abc.SocketAttribute.local_address, None)
        if info == "server_addr":
            return self._stream.extra(anyio.abc.SocketAttribute.remote_address, None)
        return None


class _Backend(httpcore.AsyncNetworkBackend):
    """Connects as httpcore's anyio backend does; its connections are :class:`_Stream`."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_tcp(host, port, local_host=local_address)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except (OSError, anyio.BrokenResourceError) as exc:
            raise httpcore.ConnectError(exc) from exc
        for option in socket_options or ():
            stream.extra(anyio.abc.SocketAttribute.raw_socket).setsockopt(*option)
        return _Stream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_unix(path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except (OSError, anyio.BrokenResourceError) as exc:
            raise httpcore.ConnectError(exc) from exc
        for option in socket_options or ():
            stream.extra(anyio.abc.SocketAttribute.raw_socket).setsockopt(*option)
        return _Stream(stream)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


def transport(tls: ssl.SSLContext, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """An HTTP/1.1 transport as httpx makes it (its request and response mapping, its
    errors), whose pool runs on :class:`_Backend`.

    httpx takes no network backend, so its pool is replaced by the same pool made with one.
    """
    made = httpx.AsyncHTTPTransport(verify=tls, limits=limits)
    made._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_Backend(),
    )
    return made
