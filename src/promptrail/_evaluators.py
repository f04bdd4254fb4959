"""The built-in evaluators, one pure function each (docs/api-notes.md, "Datasets and
experiments").

Shared by the collector (experiments run on the service) and the SDK (``run_experiment`` in
the caller's process), so that a verdict means the same wherever it was made. Each takes the
output's text and the item's expected output (a string, a JSON object, or None) and returns
the score's value, or None when there is nothing to score (no expected output to compare).
An expected JSON object is compared with the output parsed as JSON by ``exact_match``, and as
its JSON text (keys sorted) by ``contains`` and ``similarity``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

BUILT_IN = ("exact_match", "contains", "regex", "json_valid", "similarity", "llm_judge")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def expected_text(expected: Any) -> str | None:
    """Return the expected output as text (a JSON object as its JSON, keys sorted)."""
    if expected is None:
        return None
    if isinstance(expected, str):
        return expected
    return json.dumps(expected, ensure_ascii=False, sort_keys=True)


def exact_match(output: str, expected: Any) -> bool | None:
    """Whether the output equals the expected output, both stripped (an object: as JSON)."""
    if expected is None:
        return None
    if isinstance(expected, Mapping):
        try:
            return bool(json.loads(output) == expected)
        except ValueError:
            return False
    return output.strip() == str(expected).strip()


def contains(output: str, expected: Any) -> bool | None:
    """Whether the expected output, stripped, is in the output."""
    text = expected_text(expected)
    return None if text is None else text.strip() in output.strip()


def regex(output: str, pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` is found anywhere in the output (``re.search``)."""
    return pattern.search(output) is not None


def json_valid(output: str) -> bool:
    """Whether the output parses as JSON."""
    try:
        json.loads(output)
    except ValueError:
        return False
    return True


def similarity(output: str, expected: Any) -> float | None:
    """A normalised string similarity to the expected output, 0 to 1 (difflib's ratio,
    ``2·M/T`` over the stripped texts), rounded to 4 decimals."""
    text = expected_text(expected)
    if text is None:
        return None
    ratio = difflib.SequenceMatcher(None, output.strip(), text.strip(), autojunk=False).ratio()
    return round(ratio, 4)


def judge_value(reply: str, categories: Mapping[str, float] | None = None) -> float | None:
    """The score a judge's reply gives: the value of the first category it names (matched as
    a whole word, any case), or without categories the first number in it; None if none."""
    if categories:
        first: tuple[int, float] | None = None
        for name, value in categories.items():
            found = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", reply, re.IGNORECASE)
            if found and (first is None or found.start() < first[0]):
                first = (found.start(), float(value))
        return None if first is None else first[1]
    number = _NUMBER.search(reply)
    return None if number is None else float(number.group())


def evaluate_simple(
    kind: str, output: str, expected: Any, pattern: re.Pattern[str] | None = None
) -> Any:
    """Apply a built-in evaluator other than ``llm_judge``; return its value (or None)."""
    if kind == "exact_match":
        return exact_match(output, expected)
    if kind == "contains":
        return contains(output, expected)
    if kind == "regex":
        assert pattern is not None
        return regex(output, pattern)
    if kind == "json_valid":
        return json_valid(output)
    if kind == "similarity":
        return similarity(output, expected)
    raise ValueError(f"unknown evaluator {kind!r}")
