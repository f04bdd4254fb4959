"""What a rule reads of a record (docs/api-notes.md, "Online evaluation"): whether the record
matches the rule's filter, and the evaluator's input, output and expected output by the
rule's mapping.

Mapping paths: ``input``, ``input_variables``, ``input_variables.<key>``, ``output``,
``output.<key>`` (``output.content`` among them) and ``metadata.<key>``. Without a mapping the
input is the record's ``input`` when it has one, else its ``input_variables``, and the output
is ``output.content`` when present, else the whole ``output``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...models.evaluation import RuleIn
from ...store.evaluation_work import Candidate

_MISSING = object()


@dataclass(frozen=True)
class Mapped:
    """An evaluator's three inputs from one target (None where a path names nothing)."""

    input: Any
    output: Any
    expected: Any


def matches(spec: RuleIn, record: Candidate, label_version: int | None) -> bool:
    """Whether ``record`` passes the rule's filter (``label_version``: the version the
    filter's label names now; None when it names none)."""
    rule = spec.filter
    if rule.prompt_name is not None and record.prompt_name != rule.prompt_name:
        return False
    if rule.version is not None and record.version != rule.version:
        return False
    if rule.label is not None and (label_version is None or record.version != label_version):
        return False
    for field in ("model", "kind", "status", "span_name"):
        wanted = getattr(rule, field)
        if wanted is not None and getattr(record, field) != wanted:
            return False
    for key, wanted in rule.metadata.items():
        found = record.metadata.get(key, _MISSING)
        if (
            found is _MISSING
            or found != wanted
            or isinstance(found, bool) != isinstance(wanted, bool)
        ):
            return False
    return True


def value_at(record: Candidate, path: str) -> Any:
    """The record's value at a mapping path, or None when it names nothing there."""
    head, _, key = path.partition(".")
    if head == "input" and not key:
        return record.input
    if head == "input_variables":
        return record.input_variables if not key else record.input_variables.get(key)
    if head == "output":
        return record.output if not key else record.output.get(key)
    if head == "metadata" and key:
        return record.metadata.get(key)
    return None


def mapped(spec: RuleIn, record: Candidate) -> Mapped:
    """The evaluator's input, output and expected output from ``record``."""
    mapping = spec.mapping
    if mapping is None:
        given = record.input if record.input not in (None, "", []) else record.input_variables
        content = record.output.get("content")
        return Mapped(given, content if content is not None else record.output, None)
    expected = None if mapping.expected is None else value_at(record, mapping.expected)
    return Mapped(value_at(record, mapping.input), value_at(record, mapping.output), expected)


def as_text(value: Any) -> str:
    """A mapped value as the text an evaluator reads (anything but a string as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
