"""A streamed openai call's own Python calls on the application's thread (issue 52.3).

Each Python call a captured stream adds costs the calling thread several times what it costs
timed alone (docs/benchmarks.md, "SDK overhead, black-box harness"), so the captured stream's
``__iter__`` and finaliser are the C getters of the SDK stream's subclass, and the stream is
captured in place inside the wrapper's ``handle``. These tests count the Python frames of a
whole streamed call (made, read to its end, dropped) against the bare SDK's, and hold the
finaliser to its job: every way a stream ends or is dropped is recorded once, and nothing is
reported as an error while the garbage collector frees it. Real ``openai`` SDK, real
server-sent events from an in-process transport, a live collector.
"""

from __future__ import annotations

import gc
import json
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from promptrail._context import rendered
from tests.capture import Records
from tests.provider_clients import openai_answering

MESSAGES = [{"role": "user", "content": "Count for me"}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
# The captured call's Python calls beyond the bare SDK's, whatever the stream's length: the
# wrapper, the record and its __init__, handle, the first chunk's reading, the finish chunk's
# and its usage's, the record's end and the shipper's on_end, and the dropped stream's
# finaliser reaching finish() (which returns at once). It was 15: a Python __iter__ and
# finaliser, capture_in_place, _runtime.tracer() and the latest chunk of text read by a call.
EXTRA_CALLS = 10


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-frames",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _body(words: int) -> bytes:
    """The role, ``words`` chunks of text, the finish with the usage, [DONE] (the harness's
    shape: benchmarks/sdk_blackbox.py)."""
    return (
        _event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
        + b"".join(
            _event([{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}])
            for i in range(words)
        )
        + _event([{"index": 0, "delta": {}, "finish_reason": "stop"}], usage=USAGE)
        + b"data: [DONE]\n\n"
    )


def _words(count: int) -> str:
    return "".join(f"w{i} " for i in range(count))


def _call(create: Callable[..., Any]) -> Any:
    return create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )


def _frames_of_a_streamed_call(create: Callable[..., Any]) -> int:
    """Python frames entered (calls and generator resumes) by one streamed call: made, read
    to its end by a for loop, dropped."""
    entered = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal entered
        if event == "call":
            entered += 1

    gc.disable()  # a collection mid-call would count its finalisers' frames
    sys.setprofile(profile)
    try:
        for _ in _call(create):
            pass
    finally:
        sys.setprofile(None)
        gc.enable()
    return entered


def test_a_streamed_call_adds_few_python_calls_to_the_bare_sdks(
    capture: str, records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in a process that rendered no template (the common case): the renderings other
    # tests made are remembered for the process's life, and a call then looks its texts up.
    monkeypatch.setattr(rendered, "_items", OrderedDict())
    completions = openai_answering(_body(22)).chat.completions
    captured, bare = completions.create, completions.create.__wrapped__
    for create in (captured, bare, captured, bare):  # the SDK's and capture's first uses
        for _ in _call(create):
            pass

    # The fewest of a few calls: the call that wakes a resting shipper (a threading.Event's
    # set, in Python) enters its frames too, and the next ones find it awake.
    added = min(_frames_of_a_streamed_call(captured) for _ in range(5)) - min(
        _frames_of_a_streamed_call(bare) for _ in range(5)
    )

    assert added <= EXTRA_CALLS
    newest, *_ = records(expected=7)
    assert newest["output"]["content"] == _words(22)
    assert newest["output"]["finish_reason"] == "stop"
    assert newest["usage"]["completion_tokens"] == 7


@pytest.fixture
def unraisable() -> Iterator[list[str]]:
    """What the interpreter reports as ignored while the test runs (a finaliser's error)."""
    seen: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda report: seen.append(f"{report.exc_type}: {report.exc_value}")
    yield seen
    sys.unraisablehook = previous


@pytest.mark.parametrize("how", ["unread", "half_read", "read", "closed", "context", "iter"])
def test_a_dropped_stream_is_recorded_once_with_no_error_reported(
    capture: str, records: Records, unraisable: list[str], how: str
) -> None:
    import openai

    stream = _call(openai_answering(_body(5)).chat.completions.create)
    assert isinstance(stream, openai.Stream)
    pieces: list[str] = []
    if how == "half_read":
        pieces = [next(stream).choices[0].delta.content for _ in range(3)]
    elif how == "read":
        pieces = [chunk.choices[0].delta.content or "" for chunk in stream]
    elif how == "closed":
        pieces = [next(stream).choices[0].delta.content for _ in range(2)]
        stream.close()
    elif how == "context":
        with stream as entered:
            pieces = [chunk.choices[0].delta.content or "" for chunk in entered]
    elif how == "iter":  # iter() and __iter__() both give the one reading iterator
        items = iter(stream)
        assert stream.__iter__() is items
        pieces = [next(items).choices[0].delta.content for _ in range(2)]
        pieces += [chunk.choices[0].delta.content or "" for chunk in stream]
        del items
    del stream
    gc.collect()

    (record,) = records()
    assert unraisable == []
    assert record["output"]["content"] == "".join(pieces)
    if how == "unread":
        assert record["time_to_first_token_ms"] is None
    else:
        assert record["time_to_first_token_ms"] is not None
    if how in ("read", "context", "iter"):
        assert "".join(pieces) == _words(5)
        assert record["usage"]["completion_tokens"] == 7
    assert promptrail_stats_settled()


def promptrail_stats_settled() -> bool:
    """Every captured record was exported once (none twice, none dropped)."""
    import promptrail

    stats = promptrail.stats()
    return bool(stats["captured"] == stats["exported"] == 1 and stats["dropped_total"] == 0)
