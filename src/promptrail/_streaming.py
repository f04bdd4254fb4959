"""Streamed runs: server-sent events read line by line into event dicts.

The collector sends ``data: <json>`` events: ``start`` (request_id), ``chunk`` (content)...,
then ``end`` (usage) or ``error`` (the error body's inside). Comment lines (keep-alive pings)
and other SSE fields are skipped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any

import httpx

from ._closing import AsyncClosing, Closing
from ._errors import APIConnectionError, PromptrailError

RunEvent = dict[str, Any]


class SSEDecoder:
    """Collect the ``data:`` lines of one event and decode it at the blank line ending it."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> RunEvent | None:
        """Take one line; return the event it completes, if any."""
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value.removeprefix(" "))
        return None

    def flush(self) -> RunEvent | None:
        """Return the pending event (at a blank line, or the end of the stream)."""
        if not self._data:
            return None
        text, self._data = "\n".join(self._data), []
        try:
            event = json.loads(text)
        except ValueError as exc:
            raise _bad_event(text) from exc
        if not isinstance(event, dict):
            raise _bad_event(text)
        return event


def _bad_event(text: str) -> PromptrailError:
    return PromptrailError(f"Unexpected stream event: {text[:200]}", code="INVALID_RESPONSE")


def _broken(exc: httpx.RequestError) -> APIConnectionError:
    return APIConnectionError(f"The run's stream broke off: {exc!r}", code="CONNECTION_ERROR")


class _RunProgress:
    """What the events seen so far say: request id, text, usage, error."""

    def __init__(self) -> None:
        self.request_id: str | None = None
        self.output = ""
        self.usage: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None

    def note(self, event: RunEvent) -> RunEvent:
        kind = event.get("type")
        if kind == "start":
            self.request_id = event.get("request_id")
        elif kind == "chunk":
            self.output += str(event.get("content") or "")
        elif kind == "end":
            self.usage = event.get("usage")
        elif kind == "error":
            self.error = event.get("error")
        return event


class RunStream(_RunProgress, Closing):
    """Iterate the events of a streamed run as dicts; close the connection at the end.

    Besides the events, it keeps ``request_id``, the ``output`` text so far, and the final
    ``usage`` (or ``error``). Use it as a context manager, or call :meth:`close`, when you stop
    reading early.

    >>> with client.prompts.run("greet", variables={"name": "Ada"}, stream=True) as stream:
    ...     for event in stream:
    ...         if event["type"] == "chunk":
    ...             print(event["content"], end="")
    """

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self._response = response
        self._events = self._read()

    def _read(self) -> Generator[RunEvent, None, None]:
        decoder = SSEDecoder()
        try:
            for line in self._response.iter_lines():
                event = decoder.feed(line)
                if event is not None:
                    yield self.note(event)
            event = decoder.flush()
            if event is not None:
                yield self.note(event)
        except httpx.RequestError as exc:
            raise _broken(exc) from exc
        finally:
            self._response.close()

    def __iter__(self) -> Iterator[RunEvent]:
        return self

    def __next__(self) -> RunEvent:
        return next(self._events)

    def close(self) -> None:
        """Stop reading and close the connection."""
        self._events.close()
        self._response.close()


class AsyncRunStream(_RunProgress, AsyncClosing):
    """Iterate the events of a streamed run as dicts with ``async for`` (see :class:`RunStream`).

    >>> async with await aclient.prompts.run("greet", stream=True) as stream:
    ...     async for event in stream:
    ...         print(event)
    """

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self._response = response
        self._events = self._read()

    async def _read(self) -> AsyncGenerator[RunEvent, None]:
        decoder = SSEDecoder()
        try:
            async for line in self._response.aiter_lines():
                event = decoder.feed(line)
                if event is not None:
                    yield self.note(event)
            event = decoder.flush()
            if event is not None:
                yield self.note(event)
        except httpx.RequestError as exc:
            raise _broken(exc) from exc
        finally:
            await self._response.aclose()

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self

    async def __anext__(self) -> RunEvent:
        return await anext(self._events)

    async def aclose(self) -> None:
        """Stop reading and close the connection."""
        await self._events.aclose()
        await self._response.aclose()
