"""Arbitrary JSON bodies for the write routes' property tests: valid bodies with fields
replaced by odd values (NaN and Infinity literals, lone surrogates, NUL, integers past 64 bits,
3,000-deep nesting), sent as hand-written JSON text, and the check that a refusal is a 4xx
with the contract's error body."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "promptrail-hypothesis")
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

_DEEP = "\x00deep"
_ODD_TEXT = ("\ud800", "\x00", "x" * 70_000, "", "a\nb")
_ODD_NUMBERS = (2**64, -(2**63) - 1, float("nan"), float("inf"), -1, 0, 1.5, True)


def json_values(
    *words: str, numbers: tuple[Any, ...] = (), keys: tuple[str, ...] = ()
) -> st.SearchStrategy[Any]:
    """Any JSON value, its leaves odd text, odd numbers, the deep placeholder, null, short text
    and the route's own ``words`` (names it knows, URLs it must refuse) and ``numbers``;
    ``keys`` are odd object keys besides short text."""
    scalar = st.one_of(
        st.sampled_from([*_ODD_TEXT, *words]),
        st.sampled_from([*_ODD_NUMBERS, *numbers]),
        st.just(_DEEP),
        st.none(),
        st.text(max_size=8),
    )
    key = st.one_of(st.text(max_size=8), st.sampled_from(keys)) if keys else st.text(max_size=8)
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(key, inner, max_size=3)
        ),
        max_leaves=6,
    )


JSON_VALUE = json_values("owner", "admin")


def body_of(
    fields: dict[str, Any],
    values: st.SearchStrategy[Any] = JSON_VALUE,
    *,
    objects_only: bool = False,
) -> st.SearchStrategy[Any]:
    """Bodies from valid ``fields``, each kept, replaced by one of ``values`` or left out;
    now and then (unless ``objects_only``) a body that is no object at all."""
    missing = object()
    drawn = st.fixed_dictionaries(
        {key: st.one_of(st.just(value), values, st.just(missing)) for key, value in fields.items()},
        optional={"unexpected": values},
    ).map(lambda body: {k: v for k, v in body.items() if v is not missing})
    return drawn if objects_only else st.one_of(drawn, drawn, drawn, values)


def send(api: TestClient, method: str, path: str, body: Any) -> Any:
    """Send ``body`` as JSON text written by hand (NaN a literal, the deep placeholder 3,000
    nested arrays)."""
    text = json.dumps(body, allow_nan=True).replace(json.dumps(_DEEP), "[" * 3000 + "]" * 3000)
    return api.request(
        method, path, content=text.encode(), headers={"content-type": "application/json"}
    )


def taken(response: Any) -> bool:
    """Whether the write was taken (2xx); else check it is a 4xx with the error body."""
    if response.status_code < 300:
        return True
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "code", "details"}, error
    return False
