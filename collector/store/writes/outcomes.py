"""What a write answers: its rows are stored, or they were refused and why.

The store knows nothing of HTTP: a service turns a :class:`Refused` into its 503
(``STORE_BUSY`` when :attr:`Refused.busy`, else ``STORE_UNAVAILABLE``) with ``Retry-After``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stored:
    """Every row handed to the write is stored (readable by every read that follows)."""


@dataclass(frozen=True)
class Refused:
    """The rows were not stored (or, said in :attr:`message`, not confirmed stored).

    ``busy``: the store takes rows slower than they arrive and has no room for more (come
    back once it drained); otherwise its writes fail. ``details`` say what the writer knows
    of it (the bytes waiting, since when writes fail), for a health check.
    """

    busy: bool
    message: str
    details: dict[str, object] = field(default_factory=dict)


WriteOutcome = Stored | Refused
"""The answer of every write of the write path: :class:`Stored` or :class:`Refused`."""

STORED = Stored()
