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
SCALAR = st.one_of(
    st.sampled_from(["\ud800", "\x00", "x" * 70_000, "", "a\nb", "owner", "admin"]),
    st.sampled_from([2**64, -(2**63) - 1, float("nan"), float("inf"), -1, 0, 1.5, True]),
    st.just(_DEEP),
    st.none(),
    st.text(max_size=8),
)
JSON_VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def body_of(fields: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Bodies from valid ``fields``, each kept, replaced by anything or left out; now and
    then a body that is no object at all."""
    missing = object()
    drawn = st.fixed_dictionaries(
        {
            key: st.one_of(st.just(value), JSON_VALUE, st.just(missing))
            for key, value in fields.items()
        },
        optional={"unexpected": JSON_VALUE},
    ).map(lambda body: {k: v for k, v in body.items() if v is not missing})
    return st.one_of(drawn, drawn, drawn, JSON_VALUE)


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
