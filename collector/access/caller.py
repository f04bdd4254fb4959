"""The caller of the request being served, for checks deep in a service.

The access check (``api/access.py``) sets it once it has allowed a request; a sync route runs
on the thread pool with a copy of the request's context, so the service code of that request
reads the same caller, and no other request's. Outside a request it is None.
"""

from __future__ import annotations

from contextvars import ContextVar

from .principal import Principal

_CALLER: ContextVar[Principal | None] = ContextVar("promptrail_caller", default=None)


def current_caller() -> Principal | None:
    """The principal of the request being served, or None outside one."""
    return _CALLER.get()


def set_caller(principal: Principal) -> None:
    """Name the caller of the request being served (its context ends with the request)."""
    _CALLER.set(principal)
