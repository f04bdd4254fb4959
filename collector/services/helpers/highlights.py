"""Search hits: which fields of a record matched, and highlighted snippets of them."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

from ...store.request_rows import RequestRow

# Texts longer than this are cut to a window around the first match.
MAX_SNIPPET = 300
_CONTEXT = 120


def matched_fields(row: RequestRow, query: str) -> dict[str, str]:
    """Return ``{dotted field path: highlighted text}`` of every string value containing query."""
    needle = query.lower()
    hits: dict[str, str] = {}
    sources = (
        ("input_variables", row.input_variables),
        ("output", row.output),
        ("metadata", row.metadata),
        ("input", row.input),
    )
    for root, value in sources:
        for path, text in _strings(root, value):
            if needle in text.lower():
                hits.setdefault(_public_path(path), highlight(text, query))
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


def highlight(text: str, query: str) -> str:
    """Wrap every case-insensitive match of query in ``<em>``; escape the rest as HTML."""
    lowered, needle = text.lower(), query.lower()
    start, end = 0, len(text)
    first = lowered.find(needle)
    if len(text) > MAX_SNIPPET and first >= 0:
        start = max(0, first - _CONTEXT)
        end = min(len(text), first + len(needle) + _CONTEXT)
    pieces: list[str] = ["…" if start > 0 else ""]
    position = start
    while True:
        found = lowered.find(needle, position, end)
        if found < 0 or found + len(needle) > end:
            break
        pieces.append(html.escape(text[position:found]))
        pieces.append(f"<em>{html.escape(text[found : found + len(needle)])}</em>")
        position = found + len(needle)
    pieces.append(html.escape(text[position:end]))
    pieces.append("…" if end < len(text) else "")
    return "".join(pieces)
