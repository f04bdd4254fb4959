"""A captured call's JSON parts (its messages, its output) reach the record unchanged.

The shipper skips the JSON text of these parts (two compiled calls instead of the standard
library's encoder and decoder); the record must hold what reading that text back would give.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from promptrail._capture.spans import _as_json
from promptrail._context import MAX_ATTRIBUTE_CHARS, to_json
from promptrail._genai import _loads

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers(0, 99), inner, max_size=4)
    ),
    max_leaves=20,
)


def recorded(value: Any) -> Any:
    """What a record holds for a JSON part given as ``value`` (as build_record reads it)."""
    return _loads(value)


@given(json_values)
def test_a_part_is_recorded_as_its_json_text_reads_back(value: Any) -> None:
    assert recorded(_as_json(value)) == json.loads(to_json(value))


def test_text_that_looks_like_json_stays_text() -> None:
    for text in ['{"a": 1}', "42", "[1, 2]", "null"]:
        assert recorded(_as_json(text)) == text


def test_objects_json_cannot_hold_are_shown_by_their_repr() -> None:
    class Tool:
        def __repr__(self) -> str:
            return "Tool(search)"

    assert recorded(_as_json({"tool": Tool()})) == {"tool": "Tool(search)"}


def test_an_overlong_part_is_cut_as_before() -> None:
    long = [{"content": "x" * (MAX_ATTRIBUTE_CHARS + 10)}]

    assert recorded(_as_json(long)) == json.loads(to_json(long))
