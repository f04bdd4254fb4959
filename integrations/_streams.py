"""Stream proxies: the user's stream object stays itself, and the call is recorded when it
ends, is closed, or is garbage-collected half-read.

``wrapt.ObjectProxy`` keeps ``isinstance(s, openai.Stream)``, every attribute and helper
method working; only iteration, context management and ``close`` are intercepted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import wrapt

from ._calls import CallRecord

OnItem = Callable[[CallRecord, Any], None]
ReadStream = Callable[[CallRecord, Iterable[Any], object], Iterator[Any]]
"""The generator a for loop over a synchronous stream gets: the stream's items, each read into
the record on its way (the first one noted as the first token); it finishes the record at the
end and fails it on an error. Leaving the loop early (GeneratorExit) is the proxy's to record
(close(), __exit__ or __del__). One generator per stream and no call per item: each layer
between the caller and the SDK's own generator costs every event a resume.

The third argument is the proxy, held by the generator's frame and otherwise unused: in
``for chunk in client.chat.completions.create(...)`` nothing else holds the proxy once the loop
has its iterator, and its ``__del__`` would end the record before the first chunk."""


def item_by_item(on_item: OnItem) -> ReadStream:
    """A :data:`ReadStream` that gives each item to ``on_item``."""

    def read(record: CallRecord, stream: Iterable[Any], _proxy: object) -> Iterator[Any]:
        try:
            items = iter(stream)  # one iterator for both loops (an error here fails the call)
            # The first item apart: the time to first token is noted once, not per item.
            for item in items:
                record.first_token()
                on_item(record, item)
                yield item
                break
            for item in items:
                on_item(record, item)
                yield item
        except GeneratorExit:
            raise
        except BaseException as exc:
            record.fail(exc)
            raise
        record.finish()

    return read


class _StreamProxy(wrapt.ObjectProxy[Any]):
    """What both proxies hold: the call's record and what each item adds to it."""

    def __init__(
        self, wrapped: Any, record: CallRecord, on_item: OnItem, read: ReadStream | None = None
    ) -> None:
        super().__init__(wrapped)
        self._self_record = record
        self._self_on_item = on_item
        self._self_read = read

    def __del__(self) -> None:  # dropped half-read: record what was read
        self._self_record.finish()


class SyncStreamProxy(_StreamProxy):
    """Wrap a synchronous provider stream."""

    def __iter__(self) -> Iterator[Any]:
        # A for loop gets a generator over the stream's own iterator: resuming it costs less
        # per event than a call of __next__ through the proxy (next() on the proxy still works).
        read = self._self_read or item_by_item(self._self_on_item)
        return read(self._self_record, self.__wrapped__, self)

    def __next__(self) -> Any:
        record = self._self_record  # per event: one lookup through the proxy, not three
        try:
            item = self.__wrapped__.__next__()
        except StopIteration:
            record.finish()
            raise
        except BaseException as exc:
            record.fail(exc)
            raise
        record.first_token()
        self._self_on_item(record, item)
        return item

    def __enter__(self) -> SyncStreamProxy:
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_record.finish()

    def close(self) -> None:
        """Close the stream and record what was read."""
        try:
            self.__wrapped__.close()
        finally:
            self._self_record.finish()


class AsyncStreamProxy(_StreamProxy):
    """Wrap an asynchronous provider stream."""

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._self_events()  # as the synchronous proxy's __iter__

    async def _self_events(self) -> AsyncIterator[Any]:
        record, on_item = self._self_record, self._self_on_item
        try:
            async for item in self.__wrapped__:
                record.first_token()
                on_item(record, item)
                yield item
        except GeneratorExit:
            raise
        except BaseException as exc:
            record.fail(exc)
            raise
        record.finish()

    async def __anext__(self) -> Any:
        record = self._self_record
        try:
            item = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            record.finish()
            raise
        except BaseException as exc:
            record.fail(exc)
            raise
        record.first_token()
        self._self_on_item(record, item)
        return item

    async def __aenter__(self) -> AsyncStreamProxy:
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_record.finish()

    async def close(self) -> None:
        """Close the stream and record what was read."""
        try:
            await self.__wrapped__.close()
        finally:
            self._self_record.finish()
