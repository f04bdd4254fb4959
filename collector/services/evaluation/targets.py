"""What a rule reads of a record (docs/api-notes.md, "Online evaluation"): whether the record
matches the rule's filter, and the evaluator's input, output and expected output by the
rule's mapping.

Mapping paths: ``input``, ``input_variables``, ``input_variables.<key>``, ``output``,
``output.<key>`` (``output.content`` among them), ``metadata.<key>`` and, for a session,
``transcript``. Without a mapping the input is the record's ``input`` when it has one, else
its ``input_variables``, and the output is ``output.content`` when present, else the whole
``output``.
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


@dataclass(frozen=True)
class Target:
    """A record, trace or session a rule's filter matched, with its mapped values."""

    type: str
    id: str
    given: Mapped


def matches(spec: RuleIn, record: Candidate, label_version: int | None, span: bool = True) -> bool:
    """Whether ``record`` passes the rule's filter (``label_version``: the version the
    filter's label names now; None when it names none; ``span`` False: leave out the span
    name, which a trace tests on its root)."""
    rule = spec.filter
    if rule.prompt_name is not None and record.prompt_name != rule.prompt_name:
        return False
    if rule.version is not None and record.version != rule.version:
        return False
    if rule.label is not None and (label_version is None or record.version != label_version):
        return False
    for field in ("model", "kind", "status", "span_name") if span else ("model", "kind", "status"):
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
        return _unmapped(record)
    expected = None if mapping.expected is None else value_at(record, mapping.expected)
    return Mapped(value_at(record, mapping.input), value_at(record, mapping.output), expected)


def _unmapped(record: Candidate) -> Mapped:
    """A record's input and output where no mapping says: its ``input`` when it has one,
    else its ``input_variables``; ``output.content`` when present, else the whole output."""
    given = record.input if record.input not in (None, "", []) else record.input_variables
    content = record.output.get("content")
    return Mapped(given, content if content is not None else record.output, None)


def as_text(value: Any) -> str:
    """A mapped value as the text an evaluator reads (anything but a string as JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


MODEL_CALLS = ("llm", "embedding")


def root_of(records: list[Candidate]) -> Candidate:
    """A trace's root: its record without a parent (else its oldest)."""
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    return next((r for r in ordered if not r.parent_span_id), ordered[0])


def trace_target(
    spec: RuleIn, trace_id: str, records: list[Candidate], label_version: int | None
) -> Target | None:
    """The trace as a rule's target when one of its records passes the filter (its root's
    span name for ``span_name``); its input is its root's, its output its last model call's."""
    if not records:
        return None
    root = root_of(records)
    if spec.filter.span_name is not None and root.span_name != spec.filter.span_name:
        return None
    if not any(matches(spec, r, label_version, span=False) for r in records):
        return None
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    calls = [r for r in ordered if r.kind in MODEL_CALLS] or ordered
    last = calls[-1]
    given = mapped(spec, root)
    answer = mapped(spec, last)
    if spec.mapping is not None and spec.mapping.output.startswith("metadata."):
        return Target("trace", trace_id, given)
    return Target("trace", trace_id, Mapped(given.input, answer.output, given.expected))


def transcript(records: list[Candidate]) -> list[dict[str, Any]]:
    """A session's conversation: each model call's input and output (as a rule without a
    mapping reads a record's), oldest first."""
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    calls = [r for r in ordered if r.kind in MODEL_CALLS]
    turns = [_unmapped(r) for r in calls]
    return [{"input": t.input, "output": t.output} for t in turns]


def session_target(
    spec: RuleIn, session_id: str, records: list[Candidate], label_version: int | None
) -> Target | None:
    """The session as a rule's target when one of its records passes the filter; its input
    is its first model call's input, its output its last model call's output (its first and
    last records' when it has no model call), and the path ``transcript`` gives
    :func:`transcript`."""
    if not records or not any(matches(spec, r, label_version) for r in records):
        return None
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    calls = [r for r in ordered if r.kind in MODEL_CALLS] or ordered
    first, last = calls[0], calls[-1]
    mapping = spec.mapping
    whole = transcript(records)

    def at(path: str | None, record: Candidate) -> Any:
        if path is None:
            return None
        return whole if path == "transcript" else value_at(record, path)

    if mapping is None:
        given, answer = mapped(spec, first), mapped(spec, last)
        return Target("session", session_id, Mapped(given.input, answer.output, None))
    return Target(
        "session",
        session_id,
        Mapped(at(mapping.input, first), at(mapping.output, last), at(mapping.expected, first)),
    )
