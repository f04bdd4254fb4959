"""Single-brace templates: parsing, variables, rendering, double-brace conversion."""

from __future__ import annotations

import pytest

from promptrail.collector.errors import InvalidTemplate, ValidationFailed
from promptrail.collector.services.cursors import CursorCodec
from promptrail.collector.services.templates import (
    render_template,
    template_variables,
    to_double_brace,
)


def test_variables_in_order_of_first_use() -> None:
    assert template_variables("{b} {a} {b} {{c}} {_d1}") == ["b", "a", "_d1"]


def test_render_fills_variables_and_unescapes_literals() -> None:
    assert render_template("{{x}} = {x}, {y}", {"x": 1, "y": "two"}) == "{x} = 1, two"


def test_render_names_missing_variables_sorted() -> None:
    with pytest.raises(InvalidTemplate) as raised:
        render_template("{zeta} {alpha} {beta}", {"beta": "b"})

    assert raised.value.details == {
        "missing_variables": ["alpha", "zeta"],
        "template": "{zeta} {alpha} {beta}",
    }


@pytest.mark.parametrize("template", ["{", "}", "a { b", "{x", "x}", "{1abc}", "{a.b}", "{a b}"])
def test_lone_braces_and_non_identifiers_do_not_parse(template: str) -> None:
    with pytest.raises(InvalidTemplate):
        to_double_brace(template)


def test_to_double_brace_round_trip_of_literals() -> None:
    assert to_double_brace('{{"a": {v}}}') == '{"a": {{v}}}'


def test_cursors_refuse_what_they_did_not_issue() -> None:
    codec = CursorCodec("secret", "prompts")
    cursor = codec.encode({"at": "2026-01-01T00:00:00+00:00", "id": "abc"})

    assert codec.decode(cursor) == {"at": "2026-01-01T00:00:00+00:00", "id": "abc"}
    for forged in (
        "",
        "abc",
        cursor[:-2],
        cursor + "AA",
        CursorCodec("secret", "other").encode({}),
    ):
        with pytest.raises(ValidationFailed):
            codec.decode(forged)
