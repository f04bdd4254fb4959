"""What the collector stores of free-form JSON values: valid Unicode, bounded nesting.

Fields typed as text are checked by pydantic; values typed as any JSON (a record's output,
input, metadata, a prompt's parameters, filters) are checked here. One rule for every text
field (docs/api-notes.md): a lone UTF-16 surrogate (the JSON escape ``"\\ud800"``, which Python's
``json`` reads) is refused with 400 VALIDATION_ERROR naming the field, never stored altered. A
value nested deeper than :data:`MAX_DEPTH` is refused the same way: the serialiser that writes
rows and answers stops at ~250 levels, and the parsers that read bodies before that.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 200
_NAMED_LEVELS = 4


def json_problem(value: Any, field: str) -> tuple[str, str] | None:
    """Return (field path, message) of the first thing in ``value`` that cannot be stored.

    The walk is iterative: a value nested far too deep is reported, never a RecursionError.

    >>> json_problem({"a": ["ok", "\\ud800"]}, "output")
    ('output.a.1', 'text must be valid Unicode: a lone UTF-16 surrogate cannot be stored')
    """
    stack: list[tuple[Any, str, int]] = [(value, field, 1)]
    while stack:
        item, path, depth = stack.pop()
        if type(item) is str:
            if not is_valid_text(item):
                return path, LONE_SURROGATE
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return path, f"JSON values may nest at most {MAX_DEPTH} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in reversed(list(pairs)):
                if type(key) is str and not is_valid_text(key):
                    return f"{path}.{key.encode('utf-8', 'replace').decode()}", LONE_SURROGATE
                # Paths stop growing a few levels down: enough to find the value.
                stack.append((child, f"{path}.{key}" if depth < _NAMED_LEVELS else path, depth + 1))
    return None


def check_json(value: Any) -> Any:
    """Pydantic after-validator: refuse what :func:`json_problem` finds (message names where)."""
    problem = json_problem(value, "")
    if problem is not None:
        where, message = problem
        raise ValueError(f"{message} (at {where.lstrip('.')})" if where else message)
    return value


def is_valid_text(text: str) -> bool:
    """Return whether ``text`` is valid Unicode (no lone surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


LONE_SURROGATE = "text must be valid Unicode: a lone UTF-16 surrogate cannot be stored"
