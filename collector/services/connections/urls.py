"""A connection's ``base_url``: an http(s) URL whose host does not resolve to a link-local
address (169.254.0.0/16, fe80::/10: where clouds serve their instance metadata and
credentials). Loopback and private addresses stay allowed: self-hosted models live there.

Checked when a connection is stored and again before every call made through it (a name may
resolve elsewhere by then).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from ...errors import ValidationFailed

_FIELD = "base_url"


def parse_base_url(url: str) -> tuple[str, str]:
    """Return the URL without its trailing slash, and its host; a 400 naming ``base_url``
    when it is no http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is no number
    except ValueError:
        raise ValidationFailed(_FIELD, "base_url is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(_FIELD, "base_url must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ValidationFailed(_FIELD, "base_url must not carry credentials: use api_key")
    return url.rstrip("/"), parts.hostname


def _is_link_local(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_link_local


def _refuse(host: str) -> ValidationFailed:
    return ValidationFailed(
        _FIELD,
        f"base_url's host {host} is a link-local address (cloud metadata): not allowed",
    )


def check_host(host: str) -> None:
    """Refuse a host that is, or resolves to, a link-local address (blocking DNS lookup).

    A name that does not resolve passes: the call will say it is unreachable.
    """
    if _is_link_local(host):
        raise _refuse(host)
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return
    if any(_is_link_local(str(info[4][0])) for info in infos):
        raise _refuse(host)


async def acheck_host(host: str) -> None:
    """:func:`check_host` on the event loop (its resolver runs on a worker thread)."""
    if _is_link_local(host):
        raise _refuse(host)
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return  # an address literal, not link-local
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return
    if any(_is_link_local(str(info[4][0])) for info in infos):
        raise _refuse(host)
