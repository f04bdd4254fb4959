"""Search hits: which fields of a record matched, and highlighted snippets of them.

A snippet is a list of text runs, each plain text marked as a match or not: a console builds
text nodes from them (nothing to unescape), and the spec's ``highlights`` is the same snippet
written as HTML (escaped, every match in ``<em>``).
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any, TypedDict

from ..store.request_rows import RequestRow

# Texts longer than this are cut to a window around the first match.
MAX_SNIPPET = 300
_CONTEXT = 120


class TextRun(TypedDict):
    """A piece of a snippet: plain text, and whether it is a match of the query."""

    text: str
    match: bool


def matched_fields(row: RequestRow, query: str) -> dict[str, list[TextRun]]:
    """Return ``{dotted field path: snippet}`` of every string value containing query."""
    needle = query.lower()
    hits: dict[str, list[TextRun]] = {}
    sources = (
        ("input_variables", row.input_variables),
        ("output", row.output),
        ("metadata", row.metadata),
        ("input", row.input),
    )
    for root, value in sources:
        for path, text in _strings(root, value):
            if needle in text.lower():
                hits.setdefault(_public_path(path), snippet(text, query))
    return hits


def _public_path(path: str) -> str:
    # The output's text is the record's main content: it is reported as plain "output".
    return "output" if path == "output.content" else path


def _strings(path: str, value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(f"{path}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(f"{path}.{index}", item)
    elif value is not None and not isinstance(value, bool):
        yield path, str(value)


def snippet(text: str, query: str) -> list[TextRun]:
    """Split text into runs, every case-insensitive match of query a run of its own.

    A text longer than ``MAX_SNIPPET`` is cut to about ``_CONTEXT`` characters either side of
    the first match, with ``…`` where it was cut.
    """
    lowered, needle = text.lower(), query.lower()
    start, end = 0, len(text)
    first = lowered.find(needle)
    if len(text) > MAX_SNIPPET and first >= 0:
        start = max(0, first - _CONTEXT)
        end = min(len(text), first + len(needle) + _CONTEXT)
    runs: list[TextRun] = []
    plain = "…" if start > 0 else ""
    position = start
    while True:
        found = lowered.find(needle, position, end)
        if found < 0 or found + len(needle) > end:
            break
        plain += text[position:found]
        if plain:
            runs.append({"text": plain, "match": False})
        runs.append({"text": text[found : found + len(needle)], "match": True})
        plain, position = "", found + len(needle)
    plain += text[position:end] + ("…" if end < len(text) else "")
    if plain:
        runs.append({"text": plain, "match": False})
    return runs


def as_html(runs: list[TextRun]) -> str:
    """Write a snippet as the spec's highlight: HTML-escaped, every match in ``<em>``."""
    return "".join(
        f"<em>{html.escape(run['text'])}</em>" if run["match"] else html.escape(run["text"])
        for run in runs
    )
