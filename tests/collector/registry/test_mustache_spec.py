"""The Mustache spec's own cases for the parts chat prompts use, through the renderer the
collector and the SDK share (docs/api-notes.md, Chat prompts).

The cases are the spec's interpolation, sections, inverted and comments files, vendored in
mustache_spec.json with their source and license. Chat prompts turn HTML escaping off, so the
cases that expect ``{{var}}`` escaped expect here what ``{{{var}}}`` gives: the same text
unescaped.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from promptrail._mustache import MustacheError, parse_mustache, render_mustache

_SPEC = json.loads((Path(__file__).parent / "mustache_spec.json").read_text(encoding="utf-8"))
_CASES = [
    pytest.param(case, id=f"{part}: {case['name']}")
    for part, cases in _SPEC["specs"].items()
    for case in cases
]
# The spec's cases whose expected output is HTML-escaped (escaping is off in chat prompts).
_ESCAPING = {
    "HTML Escaping",
    "Implicit Iterators - HTML Escaping",
    "Implicit Iterator - HTML Escaping",
}


def test_the_vendored_cases_name_their_source_and_license() -> None:
    assert "github.com/mustache/spec" in _SPEC["source"]
    assert "Permission is hereby granted" in _SPEC["license"]
    assert set(_SPEC["specs"]) == {"interpolation", "sections", "inverted", "comments"}
    assert sum(len(cases) for cases in _SPEC["specs"].values()) > 100


@pytest.mark.parametrize("case", _CASES)
def test_spec_case_renders_as_the_spec_says(case: dict[str, Any]) -> None:
    expected = case["expected"]
    if case["name"] in _ESCAPING:
        expected = html.unescape(expected)
        assert expected != case["expected"]  # the case does exercise escaping

    assert render_mustache(case["template"], case["data"]) == expected


def test_double_and_triple_braces_render_alike() -> None:
    values = {"x": "<b>&\"'</b>"}

    assert render_mustache("{{x}}|{{{x}}}|{{&x}}", values) == "<b>&\"'</b>|" * 2 + "<b>&\"'</b>"


def test_a_value_is_never_parsed_as_a_template() -> None:
    assert render_mustache("{{a}}", {"a": "{{b}}", "b": "no"}) == "{{b}}"


@pytest.mark.parametrize(
    "template", ["{{#open}}never closed", "stray {{/close}}", "{{#a}}x{{/b}}", "{{>partial}}"]
)
def test_a_template_that_does_not_parse_is_refused(template: str) -> None:
    with pytest.raises(MustacheError):
        parse_mustache(template)
