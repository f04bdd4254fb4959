"""What both provider stubs share: the per-test script, the call log, the stream tracking."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

KEPT_CALLS = 10_000


@dataclass
class Script:
    """What the stub does with the next requests; a test sets it before acting."""

    reply: str = "Hello from the stub provider."
    failures: list[int] = field(default_factory=list)
    """Statuses answered, one per request, before the stub succeeds."""
    retry_after: str | None = None
    first_byte_delay: float = 0.0
    """Seconds before the status line (headers) of a successful answer."""
    chunk_delay: float = 0.0
    break_after_chunks: int | None = None
    """Break a stream off after this many text chunks."""
    break_with: Literal["drop", "error_event"] = "drop"
    """``drop``: the connection ends mid-body; ``error_event``: the provider's error event."""


@dataclass(frozen=True)
class Call:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StubProvider:
    """Base of the stubs: scripted failures and delays, and what happened to each stream."""

    url = ""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the previous test: default script, no calls, no streams."""
        self.script = Script()
        self.calls: list[Call] = []
        self.streams_completed = 0
        self.streams_cancelled = threading.Event()
        self._generation = getattr(self, "_generation", 0) + 1

    def pieces(self) -> list[str]:
        """Return the reply split the way it is streamed: one word (and its space) a piece."""
        return re.findall(r"\S+\s*", self.script.reply) or [self.script.reply]

    @staticmethod
    def count_words(messages: list[dict[str, Any]], system: str = "") -> int:
        """Return the stub's prompt token count: the words of every message."""
        words = len(system.split())
        for message in messages:
            content = message.get("content")
            words += len(content.split()) if isinstance(content, str) else 0
        return words

    def record(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        """Log a received request (the newest ``KEPT_CALLS``: a demo stub runs for days)."""
        self.calls.append(Call(path, headers, body))
        if len(self.calls) > 2 * KEPT_CALLS:
            del self.calls[:-KEPT_CALLS]

    def next_failure(self) -> int | None:
        """Return the status to fail this request with, if the script says so."""
        return self.script.failures.pop(0) if self.script.failures else None

    async def tracked(self, events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Relay a stream's bytes, noting whether it ran to its end or was cancelled."""
        # Bound now: a stream of an earlier test ending late must not count in this one.
        cancelled, generation = self.streams_cancelled, self._generation
        finished = broken = False
        try:
            async for data in events:
                yield data
            finished = True
        except StreamBroken:
            broken = True
            raise
        finally:
            if finished and generation == self._generation:
                self.streams_completed += 1
            elif not finished and not broken:
                cancelled.set()

    async def pause(self, seconds: float) -> None:
        """Sleep, if the script asks for a delay."""
        if seconds > 0:
            await asyncio.sleep(seconds)


class StreamBroken(RuntimeError):
    """Raised inside a stub's stream to end the connection mid-body (the ``drop`` script)."""
