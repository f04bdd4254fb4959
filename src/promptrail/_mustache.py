"""Mustache for chat prompts: parse, list variables, render (docs/api-notes.md, Chat prompts).

One library renders chat prompts everywhere (the collector and the SDK), so the same
template and values give the same bytes: pystache, spec-compliant for the parts chat prompts
use (interpolation, dotted names, sections, inverted sections, comments). HTML escaping is
off (``{{var}}`` and ``{{{var}}}`` render alike) and partials are refused: a template is
plain text with holes, never code, and a value is never parsed as a template again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pystache  # type: ignore[import-untyped]
from pystache.parser import ParsingError, parse  # type: ignore[import-untyped]


class MustacheError(ValueError):
    """A template that does not parse (an unclosed section, a partial)."""


@dataclass(frozen=True)
class Variable:
    """A variable a template uses: its top-level name, and how it is used.

    ``kind`` is ``"string"`` for a plain ``{{name}}`` outside any section, ``"any"`` for a
    section's or inverted section's name, a dotted name, or a name inside a section (which
    may be a field of the section's item); ``required`` is False for an inverted section's
    name and for names inside a section.
    """

    name: str
    kind: str
    required: bool


class _Renderer(pystache.Renderer):  # type: ignore[misc]
    """pystache's renderer with values written as JSON would: null as nothing, true/false."""

    def str_coerce(self, val: Any) -> str:
        if val is None:
            return ""
        if isinstance(val, bool):
            return "true" if val else "false"
        return str(val)


# No escaping: prompts are not HTML; and a missing name renders as nothing (the callers check
# required variables before rendering).
_RENDERER = _Renderer(escape=lambda text: text, missing_tags="ignore", partials={})


def parse_mustache(template: str) -> Any:
    """Parse ``template``; raise :class:`MustacheError` when it does not parse or uses a
    partial. Returns pystache's parsed template."""
    try:
        parsed = parse(template, raise_on_mismatch=True)
    except ParsingError as error:
        raise MustacheError(str(error)) from None
    for node, _ in _walk(parsed._parse_tree, 0):
        if type(node).__name__ == "_PartialNode":
            raise MustacheError(f"partials are not supported: {{{{>{node.key}}}}}")
    return parsed


def _walk(nodes: list[Any], depth: int) -> Iterator[tuple[Any, int]]:
    for node in nodes:
        if isinstance(node, str):
            continue
        yield node, depth
        kind = type(node).__name__
        if kind == "_SectionNode":
            yield from _walk(node.parsed._parse_tree, depth + 1)
        elif kind == "_InvertedNode":
            yield from _walk(node.parsed_section._parse_tree, depth + 1)


def mustache_variables(template: str) -> list[Variable]:
    """Return the variables ``template`` uses, by first use (see :class:`Variable`)."""
    found: dict[str, Variable] = {}
    for node, depth in _walk(parse_mustache(template)._parse_tree, 0):
        kind = type(node).__name__
        if kind not in ("_EscapeNode", "_LiteralNode", "_SectionNode", "_InvertedNode"):
            continue
        key = str(node.key)
        if key == ".":
            continue
        name = key.split(".", 1)[0]
        plain = kind in ("_EscapeNode", "_LiteralNode") and "." not in key and depth == 0
        variable = Variable(
            name,
            "string" if plain else "any",
            depth == 0 and kind != "_InvertedNode",
        )
        merge_variable(found, variable)
    return list(found.values())


def merge_variable(found: dict[str, Variable], variable: Variable) -> None:
    """Add ``variable`` to ``found``: a name used two ways is ``any``, and required when
    any use requires it."""
    seen = found.get(variable.name)
    if seen is None:
        found[variable.name] = variable
        return
    found[variable.name] = Variable(
        variable.name,
        seen.kind if seen.kind == variable.kind else "any",
        seen.required or variable.required,
    )


def render_mustache(template: str, values: Mapping[str, Any] | Any) -> str:
    """Render ``template`` with ``values``, the context: a mapping of variables (or, as the
    spec allows, any value ``{{.}}`` names). No escaping; a missing name renders as nothing."""
    return str(_RENDERER.render(parse_mustache(template), values))
