"""Captured streams: the user's stream object stays itself, and the call is recorded when it
ends, is closed, or is garbage-collected half-read.

Two ways, both leaving ``isinstance(s, openai.Stream)``, every attribute and helper method
working:

- **The SDK's own stream, its class swapped** (openai's ``Stream`` and ``AsyncStream``, done
  by ``Endpoint.handle`` in _wrappers.py): the instance's class becomes a subclass
  (:func:`in_place_class`) that only adds ``close`` and ``__del__``, and the stream's own
  iterator is replaced by the one generator that reads each item on its way
  (:data:`ReadStream`). A for loop resumes that generator in place of the SDK's pass-through
  ``__iter__``: as many frames per event as without capture. The known shape (openai 1.x to
  3.x): ``__next__`` and ``__iter__`` (or their async twins) draw from the ``_iterator`` the
  instance made in its ``__init__``, ``__exit__`` calls ``close``; only those very classes
  (subclasses of them, the SDK's helpers or another instrumentation's, take the proxy, and
  so does a stream that makes its iterator on first use, Anthropic's).
- **A ``wrapt.ObjectProxy``** for any other stream: only iteration, context management and
  ``close`` are intercepted, and each item is read as it passes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any

import wrapt

from ._calls import CallRecord, CapturedCall

_time_ns = time.time_ns

OnItem = Callable[[CallRecord, Any], None]
ReadStream = Callable[[CallRecord, Iterable[Any], object], Iterator[Any]]
"""The generator a for loop over a synchronous stream gets: the stream's items, each read into
the record on its way (the first one noted as the first token); it finishes the record at the
end and fails it on an error. Leaving the loop early (GeneratorExit) is for the stream's
close(), __exit__ or finaliser to record. One generator per stream and no call per item: each
layer between the caller and the SDK's own generator costs every event a resume.

The third argument is the stream, held by the generator's frame and otherwise unused: in
``for chunk in client.chat.completions.create(...)`` nothing else holds the stream (or its
proxy) once the loop has its iterator, and its finaliser would end the record before the first
chunk.

What a reading keeps while the stream runs matters more than the instructions it runs: the
SDK's chunks are garbage-collected objects, and keeping them all to read at the end cost the
calling thread ~65 µs more per 24-event stream than letting each go (docs/benchmarks.md, "SDK
overhead, black-box harness"); text pieces (strings) and the latest chunk are what is kept."""


def _close(stream: Any) -> None:
    """Close the stream and record what was read."""
    try:
        stream._promptrail_base.close(stream)
    finally:
        _release(stream)


async def _aclose(stream: Any) -> None:
    """Close the stream and record what was read."""
    try:
        await stream._promptrail_base.close(stream)
    finally:
        _release(stream)


def _release(stream: Any) -> None:
    """Finish the record; the stream becomes the SDK's plain object again.

    Once closed, it keeps nothing of capture's: no finaliser for the garbage collector to run
    later (a half-read stream is in a reference cycle with the SDK's own generator), and a
    read after close meets the SDK's own iterator, as without capture.
    """
    state = stream.__dict__
    record = state.pop("_promptrail_record", None)
    if record is None:
        return
    try:
        record.finish()
    finally:
        stream.__class__ = stream._promptrail_base
        state["_iterator"] = state.pop("_promptrail_items")


# The subclass's __iter__ (__aiter__) and __del__ are properties over C getters, not Python
# functions: a for loop takes the reading generator, and a dropped stream's finaliser reaches
# its record's finish(), with no Python frame of capture's own on the way (each one a streamed
# call enters costs it several times its time alone: docs/benchmarks.md, "SDK overhead,
# black-box harness"). The type's slot looks the name up and calls what the property gives:
# the generator's own __iter__ (which returns it), the record's bound finish (idempotent).
_own_iterator = property(attrgetter("_iterator.__iter__"))
_own_async_iterator = property(attrgetter("_iterator.__aiter__"))
# Dropped half-read (or never read): record it. Only the subclass has it, and an instance is of
# the subclass only while its record is in its __dict__ (_release takes both away together).
_finish_on_del = property(attrgetter("_promptrail_record.finish"))


in_place_classes: dict[type, type] = {}
"""Each SDK stream class's captured subclass, made by :func:`in_place_class`."""


def in_place_class(base: type, is_async: bool) -> type:
    """The subclass an instance of ``base`` (the SDK's own stream class) becomes while it is
    captured: ``close`` and ``__del__`` record the call, iteration takes the reading
    generator; the same layout, so ``__class__`` can be set both ways."""
    cls = in_place_classes.get(base)
    if cls is None:
        cls = type(base)(
            base.__name__,
            (base,),
            {
                "__slots__": (),  # the same layout as the SDK's class: __class__ can be set
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
                "__doc__": base.__doc__,
                "_promptrail_base": base,
                ("__aiter__" if is_async else "__iter__"): (
                    _own_async_iterator if is_async else _own_iterator
                ),
                "close": _aclose if is_async else _close,
                "__del__": _finish_on_del,
            },
        )
        in_place_classes[base] = cls
    return cls


def reader(
    record: CallRecord,
    items: Any,
    on_item: OnItem,
    read: ReadStream | None,
    is_async: bool,
    stream: object,
) -> Any:
    """The generator that reads ``items`` (the SDK's own iterator) into ``record``."""
    if is_async:
        return _each_async(record, items, on_item, stream)
    return (read or item_by_item(on_item))(record, items, stream)


async def _each_async(
    record: CallRecord, items: AsyncIterator[Any], on_item: OnItem, _stream: object
) -> AsyncIterator[Any]:
    """An async stream's items, each given to ``on_item`` (a :data:`ReadStream`'s twin)."""
    try:
        async for item in items:
            record.first_token()
            on_item(record, item)
            yield item
            break
        async for item in items:
            on_item(record, item)
            yield item
    except GeneratorExit:
        raise
    except BaseException as exc:
        record.fail(exc)
        raise
    record.finish()


# -- a stream read from its body ---------------------------------------------------------------
# Under promptrail's own tracer an SDK stream whose decoder takes the body's bytes (openai's)
# is not read item by item: the decoder gets the bytes through BodyTap, which keeps each
# network read for the record, the loop only passes the items on and counts them, and the
# record reads that many events from the bytes on the shipper's thread (CapturedCall.body,
# Endpoint.read_body). Reading each chunk on its way cost the calling thread ~0.8 µs an event
# (docs/benchmarks.md, "A streamed call read from its body").


class BodyTap(tuple[Any, CapturedCall]):
    """A stream's own SSE decoder and the record: the body's bytes are kept on their way to
    the decoder, one append per network read. A tuple: made in C, no ``__init__`` frame on
    the calling thread."""

    __slots__ = ()

    def iter_bytes(self, iterator: Iterator[bytes]) -> Any:
        decoder, record = self
        return decoder.iter_bytes(_kept(iterator, record))

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> Any:
        decoder, record = self
        return decoder.aiter_bytes(_akept(iterator, record))

    def __getattr__(self, name: str) -> Any:  # anything else the SDK asks of its decoder
        return getattr(self[0], name)


def _kept(iterator: Iterator[bytes], record: CapturedCall) -> Iterator[bytes]:
    pieces: list[bytes] = []
    record.body = pieces
    append = pieces.append
    for piece in iterator:
        append(piece)
        yield piece


async def _akept(iterator: AsyncIterator[bytes], record: CapturedCall) -> AsyncIterator[bytes]:
    pieces: list[bytes] = []
    record.body = pieces
    append = pieces.append
    async for piece in iterator:
        append(piece)
        yield piece


def counted(record: CapturedCall, stream: Iterable[Any]) -> Iterator[Any]:
    """The SDK's items passed on and counted (``record.events``): a stream left early
    records what the caller took. Ends and fails the record as a :data:`ReadStream` does."""
    try:
        items = iter(stream)  # one iterator for both loops (an error here fails the call)
        for item in items:
            record._first_token_at = _time_ns()  # record.first_token(), inline
            record.events = 1
            yield item
            break
        events = 1
        for item in items:
            events += 1
            record.events = events
            yield item
    except GeneratorExit:  # left early: the stream's close(), __exit__ or finaliser
        raise
    except BaseException as exc:
        record.fail(exc)
        raise
    record.finish()


async def acounted(record: CapturedCall, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """:func:`counted`'s async twin."""
    try:
        items = stream.__aiter__()  # one iterator for both loops
        async for item in items:
            record._first_token_at = _time_ns()
            record.events = 1
            yield item
            break
        events = 1
        async for item in items:
            events += 1
            record.events = events
            yield item
    except GeneratorExit:
        raise
    except BaseException as exc:
        record.fail(exc)
        raise
    record.finish()


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
