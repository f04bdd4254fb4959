"""Single-brace templates: parse, list variables, render, convert to double braces.

A stored template writes variables as ``{name}`` and literal braces as ``{{`` and ``}}``
(Python ``str.format`` rules, restricted to identifier names, any script included). A
lone brace is an error, so a template that parses today renders the same way on the service
and on every client.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ...errors import InvalidTemplate

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_EXCERPT = 200


@dataclass(frozen=True)
class Segment:
    """A piece of a parsed template: literal text, or a variable when ``variable`` is set."""

    text: str
    variable: str | None = None


def parse_template(template: str) -> list[Segment]:
    """Split a template into literal and variable segments, or raise InvalidTemplate."""
    return list(_segments(template))


def _segments(template: str) -> Iterator[Segment]:
    position = 0
    for match in _TOKEN.finditer(template):
        if match.start() > position:
            yield Segment(template[position : match.start()])
        token = match.group(0)
        name = match.group(1)
        if name is not None and name.isidentifier():
            yield Segment(token, variable=name)
        elif name is not None:
            raise InvalidTemplate(
                f"'{token}' at position {match.start()} is not a variable: names are "
                "identifiers (letters, digits, '_'; not starting with a digit); write '{{' "
                "and '}}' for literal braces",
                {"position": match.start(), "template": _excerpt(template)},
            )
        elif token in ("{{", "}}"):
            yield Segment(token[0])
        else:
            raise InvalidTemplate(
                f"Unmatched '{token}' at position {match.start()}: write '{token * 2}' for a "
                "literal brace, or {name} for a variable",
                {"position": match.start(), "template": _excerpt(template)},
            )
        position = match.end()
    if position < len(template):
        yield Segment(template[position:])


def template_variables(template: str) -> list[str]:
    """Return the template's variable names in order of first use."""
    seen: dict[str, None] = {}
    for segment in parse_template(template):
        if segment.variable is not None:
            seen.setdefault(segment.variable)
    return list(seen)


def render_template(template: str, values: Mapping[str, object]) -> str:
    """Fill every variable from ``values``; raise InvalidTemplate naming the missing ones."""
    segments = parse_template(template)
    missing = sorted({s.variable for s in segments if s.variable and s.variable not in values})
    if missing:
        raise InvalidTemplate(
            f"Template variables are undefined: {', '.join(missing)}",
            {"missing_variables": missing, "template": template},
        )
    return "".join(str(values[s.variable]) if s.variable else s.text for s in segments)


def to_double_brace(template: str) -> str:
    """Rewrite ``{var}`` as ``{{var}}`` and the escapes ``{{``/``}}`` as single braces."""
    return "".join(
        "{{" + s.variable + "}}" if s.variable else s.text for s in parse_template(template)
    )


def _excerpt(template: str) -> str:
    return template if len(template) <= _EXCERPT else template[:_EXCERPT] + "…"
