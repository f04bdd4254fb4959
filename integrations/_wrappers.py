"""The wrappers of a provider SDK's ``create`` methods, sync and async, for every provider.

A wrapper records the call and hands back the SDK's own result: a stream is recorded as it is
read (the SDK's own object, or a proxy: _streams.py), a ``with_raw_response`` result is parsed
for the record only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from promptrail._capture.spans import current_context
from promptrail._context import framework_call

from ._calls import CallRecord, CapturedCall, is_raw_response, suppressed
from ._patching import Patch
from ._streams import (
    AsyncStreamProxy,
    BodyTap,
    ReadStream,
    SyncStreamProxy,
    acounted,
    counted,
    in_place_class,
    in_place_classes,
    reader,
)

Start = Callable[[dict[str, Any]], CallRecord]
OnResult = Callable[[CallRecord, Any], None]

# What a result of a given type is (decided once per type, as is_raw_response does): a whole
# result, a stream (proxied), a with_raw_response answer, or one of the SDK's own stream
# classes, captured in place (_streams.py).
_PLAIN, _RAW, _STREAM, _IN_PLACE = 0, 1, 2, 3


@dataclass(frozen=True)
class Endpoint:
    """How the calls of one provider method are recorded."""

    start: Start
    """The record of a call, from its keyword arguments."""
    on_result: OnResult
    """Fill the record from a whole result."""
    on_item: OnResult
    """Fill the record from one item (chunk, event) of a stream."""
    stream_types: Callable[[], tuple[type, ...]]
    """The SDK's stream classes (imported on first use)."""
    read_stream: ReadStream | None = None
    """A synchronous stream's items as the caller gets them, each read into the record on
    its way (``on_item`` item by item when None): one generator that reads inline costs less
    per event than a call per item. Leaving the loop early (GeneratorExit) is recorded by
    the stream's close or finaliser (_streams.py)."""
    read_body: Callable[[CallRecord, bytes, int], None] | None = None
    """Read a stream's first ``events`` events from its body's bytes (on the shipper's
    thread): given, an SDK stream captured in place whose decoder takes the body's bytes is
    read from them under promptrail's own tracer, not item by item (_streams.BodyTap)."""
    _kinds: dict[type, int] = field(default_factory=dict, compare=False, repr=False)

    def _kind(self, result: Any) -> int:
        kind = self._kinds.get(type(result))
        if kind is None:
            if type(result) in self.stream_types() and hasattr(result, "__dict__"):
                kind = _IN_PLACE
            elif isinstance(result, self.stream_types()):
                kind = _STREAM
            elif is_raw_response(result):
                kind = _RAW
            else:
                kind = _PLAIN
            self._kinds[type(result)] = kind
        return kind

    def handle(self, record: CallRecord, result: Any, is_async: bool) -> Any:
        """Record ``result`` (or proxy it, a stream); return what the caller gets."""
        kind = self._kinds.get(type(result))
        if kind is None:
            kind = self._kind(result)
        if kind == _PLAIN:
            record.done(self.on_result, result)
        elif kind >= _STREAM:
            if kind == _IN_PLACE:
                # Captured in place, here rather than in a function of _streams.py (one
                # Python call fewer a streamed call): the SDK's own object, its iterator
                # replaced by the reading generator and its class by a subclass that records
                # the call however the stream ends (_streams.in_place_class).
                state = result.__dict__
                items = state.get("_iterator")
                if items is not None:  # not made on first use (Anthropic's): the known shape
                    cls = in_place_classes.get(type(result)) or in_place_class(
                        type(result), is_async
                    )
                    state["_promptrail_items"] = items
                    read_body = self.read_body
                    if (
                        read_body is not None
                        and isinstance(record, CapturedCall)
                        and hasattr(
                            decoder := state.get("_decoder"),
                            "aiter_bytes" if is_async else "iter_bytes",
                        )
                    ):
                        state["_decoder"] = BodyTap((decoder, record))
                        record.read_body = read_body
                        state["_iterator"] = (acounted if is_async else counted)(record, items)
                    elif is_async or self.read_stream is None:
                        state["_iterator"] = reader(
                            record, items, self.on_item, self.read_stream, is_async, result
                        )
                    else:
                        state["_iterator"] = self.read_stream(record, items, result)
                    state["_promptrail_record"] = record
                    result.__class__ = cls
                    return result
            if is_async:
                return AsyncStreamProxy(result, record, self.on_item)
            return SyncStreamProxy(result, record, self.on_item, self.read_stream)
        else:
            # with_raw_response: the SDK hands back the raw response; parse() is cached, so the
            # caller's own parse() returns the very object recorded here.
            recorded = result.parse()
            if isinstance(recorded, self.stream_types()):
                record.finish()
                return result
            record.done(self.on_result, recorded)
        return result


def sync_wrapper(endpoint: Endpoint) -> Callable[..., Any]:
    """The wrapt wrapper of a synchronous method."""
    start, handle = endpoint.start, endpoint.handle

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        # calls.suppressed(), inlined: the first thing every model call does.
        if current_context().get(_SUPPRESS_INSTRUMENTATION_KEY) or (
            (call := framework_call()) is not None and call.open
        ):
            return wrapped(*args, **kwargs)
        record = start(kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            record.fail(exc)
            raise
        return handle(record, result, False)

    return wrapper


def async_wrapper(endpoint: Endpoint) -> Callable[..., Any]:
    """The wrapt wrapper of an ``async`` method."""

    async def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if suppressed():
            return await wrapped(*args, **kwargs)
        record = endpoint.start(kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            record.fail(exc)
            raise
        return endpoint.handle(record, result, is_async=True)

    return wrapper


def sync_and_async(module: str, name: str, endpoint: Endpoint) -> tuple[Patch, Patch]:
    """The patches of ``Class.method`` and its twin ``AsyncClass.method`` in ``module``."""
    return (
        Patch(module, name, sync_wrapper(endpoint)),
        Patch(module, f"Async{name}", async_wrapper(endpoint)),
    )
