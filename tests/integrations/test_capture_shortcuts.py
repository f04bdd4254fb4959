"""The shortcuts of the capture path give exactly what the general path gives.

Arguments mapped without ``inspect.Signature.bind``, timestamps formatted without
``datetime``, and observed-function spans that skip the model lookups must not change a
single record.
"""

from __future__ import annotations

import inspect
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from promptrail import _genai
from promptrail._observe import _Options


def _options(function: Any, exclude: frozenset[str] = frozenset()) -> _Options:
    return _Options("f", None, None, {}, exclude, True, True, inspect.signature(function))


def plain(a: Any, b: Any = 2, *, c: Any = 3) -> None: ...


def method(self: Any, value: Any, token: Any = None) -> None: ...


def variadic(a: Any, /, b: Any, *rest: Any, c: Any = 1, **extra: Any) -> None: ...


CALLS: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
    (plain, (1,), {}),
    (plain, (1, 5), {}),
    (plain, (1,), {"c": 9}),
    (plain, (), {"b": 1, "a": 2}),
    (plain, (), {}),
    (plain, (1, 2, 3), {}),
    (plain, (1,), {"a": 2}),
    (plain, (1,), {"unknown": 2}),
    (method, ("self", 1), {"token": "t"}),
    (variadic, (1, 2, 3, 4), {"c": 5, "d": 6}),
    (variadic, (1,), {"b": 2, "exclude_me": 3}),
]


@pytest.mark.parametrize(("function", "args", "kwargs"), CALLS)
def test_argument_names_match_a_full_bind(
    function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    for exclude in (frozenset(), frozenset({"b", "token", "exclude_me"})):
        options = _options(function, exclude)

        fast = options.variables(args, kwargs)

        general = options._bound_variables(args, kwargs)
        assert list(fast.items()) == list(general.items())


def test_timestamps_match_datetime() -> None:
    rng = random.Random(5)
    samples = [0, 1, 999_999_999, 1_000_000_000, 1_795_000_000_123_456_789]
    samples += [rng.randrange(0, 2**64) for _ in range(20_000)]
    # Values where rounding to the microsecond carries into the next millisecond or second.
    for _ in range(20_000):
        second = rng.randrange(0, 2**64 // 10**9)
        samples.append(second * 10**9 + rng.choice([999_999_500, 999_999_499, 999_500, 499]))

    for ns in samples:
        expected = datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat(timespec="milliseconds")
        assert _genai._iso(ns) == expected


VALUES: list[Any] = [
    None,
    "",
    "x",
    "{}",
    '{"a": 1}',
    "[1, 2]",
    "1",
    "not json",
    3,
    0,
    -1,
    2.5,
    True,
]


def test_function_spans_skip_only_lookups_that_find_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(7)
    keys = sorted(_genai._FUNCTION_KEYS)
    for _ in range(2_000):
        attributes = {k: rng.choice(VALUES) for k in rng.sample(keys, rng.randint(0, len(keys)))}
        parts = ("f", rng.getrandbits(128), rng.getrandbits(64), rng.choice([None, 7]))
        times = (10**18, 10**18 + 5_000_000)
        outcome = (attributes, rng.random() < 0.3, rng.choice(["", "boom"]))

        shortcut = _genai.build_record(*parts, *times, *outcome)
        with monkeypatch.context() as patched:
            patched.setattr(_genai, "_FUNCTION_KEYS", frozenset())
            general = _genai.build_record(*parts, *times, *outcome)

        assert shortcut == general
