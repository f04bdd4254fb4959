"""What capture shares across its parts: the sampling rule, and a child's start after fork."""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class Sampler:
    """Keep a share of traces, decided by trace id: whole traces, the same in every process."""

    __slots__ = ("_below",)

    def __init__(self, rate: float) -> None:
        self._below = int(max(0.0, min(1.0, rate)) * (1 << 64))

    def keeps(self, trace_id: int) -> bool:
        """Whether the trace ``trace_id`` is kept."""
        return (trace_id & 0xFFFFFFFFFFFFFFFF) < self._below


class _ForkAware(Protocol):
    def _after_fork(self) -> None: ...


# One fork hook for every registered object: a hook per object would keep each one alive
# (``os.register_at_fork`` has no way to unregister).
_after_fork: weakref.WeakSet[_ForkAware] = weakref.WeakSet()


def restart_after_fork(owner: _ForkAware) -> None:
    """Call ``owner._after_fork()`` in each child forked while ``owner`` is alive."""
    _after_fork.add(owner)


def forget_after_fork(owner: _ForkAware) -> None:
    """Stop calling ``owner._after_fork()`` in children (it is closed)."""
    _after_fork.discard(owner)


def _in_child() -> None:
    for owner in list(_after_fork):
        owner._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
