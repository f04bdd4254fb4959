"""The connection pool of the provider clients: httpcore's own, over a network backend made
for the collector's event loop: asyncio's streams (docs/benchmarks.md, "Playground").

httpcore's default backend runs over anyio's streams, which cost the event loop more than the
request itself when eight calls run at once:

- every read and write first yields to the event loop (anyio's checkpoint), even when the
  bytes are already there or the socket takes them at once: each of a streamed call's reads
  waits for every other cell's turn, and each yield is a trip through the loop;
- each read and write sits in two context managers (a cancel scope and an exception map);
- before every request (and again when a response is closed) httpcore's pool asks each idle
  connection whether its server closed it (``get_extra_info("is_readable")``), and anyio
  builds the socket's whole attribute table (a ``getpeername`` system call among them) to
  answer.

asyncio's ``StreamReader`` returns bytes already received without yielding and its
``StreamWriter`` hands bytes to the socket without waiting unless the socket's buffer is full;
timeouts are asyncio's own; the idle check polls the socket kept at connect. TLS is asyncio's
(``StreamWriter.start_tls``) on the same SSL context; the errors are httpcore's, as with its own
backends.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

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
    """A connection: asyncio's reader and writer, their socket kept for the idle check."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._socket: socket.socket | None = writer.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ReadError(exc) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            if self._writer.transport.is_closing():
                raise ConnectionResetError("the connection is closed")
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                # Waits only while the socket's buffer is over its high-water mark.
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.WriteError(exc) from exc

    async def aclose(self) -> None:
        # No TLS close_notify exchange to wait for (as httpcore's anyio streams, which are
        # made not "standard compatible"): the transport closes on the loop's next turn.
        transport = self._writer.transport
        if transport.get_extra_info("ssl_object") is not None:
            transport.abort()
        else:
            transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore.ConnectTimeout(exc) from exc
        except (OSError, ssl.SSLError, EOFError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(exc) from exc
        except BaseException:
            await self.aclose()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return (
                self._reader.at_eof()
                or self._writer.transport.is_closing()
                or readable(self._socket)
            )
        if info == "socket":
            return self._socket
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        return None


class _Backend(httpcore.AsyncNetworkBackend):
    """Connects with asyncio; its connections are :class:`_Stream`."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                # No happy_eyeballs_delay: uvloop's loop (uvicorn's choice when installed)
                # takes none; a name's addresses are tried in turn.
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=(local_address, 0) if local_address else None
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        return _with_options(_Stream(reader, writer), socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(exc) from exc
        except OSError as exc:
            raise httpcore.ConnectError(exc) from exc
        return _with_options(_Stream(reader, writer), socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _with_options(stream: _Stream, options: Iterable[SocketOption] | None) -> _Stream:
    sock = stream.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)
    return stream


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
