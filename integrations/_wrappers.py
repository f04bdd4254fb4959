"""The wrappers of a provider SDK's ``create`` methods, sync and async, for every provider.

A wrapper records the call and hands back the SDK's own result: a stream is proxied (recorded
as it is read), a ``with_raw_response`` result is parsed for the record only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._calls import CallRecord, is_raw_response, suppressed
from ._patching import Patch
from ._streams import AsyncStreamProxy, SyncStreamProxy

Start = Callable[[dict[str, Any]], CallRecord]
OnResult = Callable[[CallRecord, Any], None]


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

    def handle(self, record: CallRecord, result: Any, is_async: bool) -> Any:
        """Record ``result`` (or proxy it, a stream); return what the caller gets."""
        stream_types = self.stream_types()
        if isinstance(result, stream_types):
            proxy = AsyncStreamProxy if is_async else SyncStreamProxy
            return proxy(result, record, self.on_item)
        recorded = result
        if is_raw_response(result):
            # with_raw_response: the SDK hands back the raw response; parse() is cached, so the
            # caller's own parse() returns the very object recorded here.
            recorded = result.parse()
            if isinstance(recorded, stream_types):
                record.finish()
                return result
        record.done(self.on_result, recorded)
        return result


def sync_wrapper(endpoint: Endpoint) -> Callable[..., Any]:
    """The wrapt wrapper of a synchronous method."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if suppressed():
            return wrapped(*args, **kwargs)
        record = endpoint.start(kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            record.fail(exc)
            raise
        return endpoint.handle(record, result, is_async=False)

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
