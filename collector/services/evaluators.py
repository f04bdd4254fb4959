"""Evaluators of experiments on the service, parsed and checked at creation (docs/api-notes.md,
"Datasets and experiments").

The verdicts themselves are :mod:`promptrail._evaluators` (shared with the SDK). A bad list
is a 400 VALIDATION_ERROR naming ``evaluators`` (an unknown type, a duplicated score name,
a regex that does not compile, a judge without its prompt), before anything runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from promptrail._evaluators import BUILT_IN

from ..errors import ValidationFailed
from ..models.json_values import json_problem

MAX_EVALUATORS = 20
_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,100}$")
_ALLOWED_KEYS = {
    "exact_match": {"type", "name"},
    "contains": {"type", "name"},
    "regex": {"type", "name", "pattern"},
    "json_valid": {"type", "name"},
    "similarity": {"type", "name"},
    "llm_judge": {"type", "name", "prompt", "label", "version", "categories"},
}
# Which named evaluator's version an evaluator came from (docs/api-notes.md, "Online
# evaluation"): set together when a reference is resolved, kept with the experiment.
_PROVENANCE = {"evaluator", "evaluator_version"}


@dataclass(frozen=True)
class Evaluator:
    """One evaluator of an experiment, checked."""

    type: str
    name: str
    pattern: re.Pattern[str] | None = None
    prompt: str | None = None
    label: str | None = None
    version: int | None = None
    categories: dict[str, float] = field(default_factory=dict)
    evaluator: str | None = None
    evaluator_version: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The evaluator as stored with its experiment (and answered)."""
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.pattern is not None:
            out["pattern"] = self.pattern.pattern
        for key in ("prompt", "label", "version"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.categories:
            out["categories"] = self.categories
        if self.evaluator is not None:
            out["evaluator"] = self.evaluator
            out["evaluator_version"] = self.evaluator_version
        return out


def _bad(index: int, message: str) -> ValidationFailed:
    return ValidationFailed("evaluators", message, index=index)


def parse_evaluators(raw: Sequence[Any]) -> list[Evaluator]:
    """Check a body's evaluators; return them, or raise 400 naming ``evaluators``."""
    if len(raw) > MAX_EVALUATORS:
        raise ValidationFailed("evaluators", f"at most {MAX_EVALUATORS} evaluators")
    parsed: list[Evaluator] = []
    for index, spec in enumerate(raw):
        if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
            raise _bad(index, "each evaluator is an object with a type")
        problem = json_problem(spec, "")
        if problem is not None:  # a lone surrogate: it could be neither stored nor answered
            raise _bad(index, problem[1])
        kind = spec["type"]
        if kind not in BUILT_IN:
            raise _bad(index, f"unknown evaluator type {kind!r}: use one of {', '.join(BUILT_IN)}")
        extra = set(spec) - _ALLOWED_KEYS[kind] - _PROVENANCE
        if extra:
            raise _bad(index, f"{kind} takes no {', '.join(sorted(extra))}")
        name = spec.get("name", kind)
        if not isinstance(name, str) or not _NAME.match(name):
            raise _bad(index, "an evaluator's name is 1-100 letters, digits or _.:-")
        evaluator = Evaluator(kind, name)
        if kind == "regex":
            evaluator = Evaluator(kind, name, pattern=_compile(index, spec.get("pattern")))
        elif kind == "llm_judge":
            evaluator = _judge(index, name, spec)
        parsed.append(_with_provenance(index, evaluator, spec))
    names = [e.name for e in parsed]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise _bad(index, f"two evaluators score under the name {name!r}: name one of them")
    return parsed


def _with_provenance(index: int, evaluator: Evaluator, spec: dict[str, Any]) -> Evaluator:
    """The evaluator marked with the named evaluator's version it was resolved from."""
    if not _PROVENANCE & set(spec):
        return evaluator
    named, version = spec.get("evaluator"), spec.get("evaluator_version")
    if (
        not isinstance(named, str)
        or isinstance(version, bool)
        or not isinstance(version, int)
        or version < 1
    ):
        raise _bad(index, 'refer to a named evaluator as {"evaluator": name, "version"?}')
    return replace(evaluator, evaluator=named, evaluator_version=version)


def _compile(index: int, pattern: Any) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not 1 <= len(pattern) <= 1000:
        raise _bad(index, "regex needs a pattern (1-1000 characters)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise _bad(index, f"the pattern does not compile: {exc}") from None


def _judge(index: int, name: str, spec: dict[str, Any]) -> Evaluator:
    prompt = spec.get("prompt")
    if not isinstance(prompt, str) or not 1 <= len(prompt) <= 200:
        raise _bad(index, "llm_judge needs prompt: the name of a stored prompt")
    label, version = spec.get("label"), spec.get("version")
    if label is not None and version is not None:
        raise _bad(index, "give a judge's label or its version, not both")
    if label is not None and (not isinstance(label, str) or not 1 <= len(label) <= 100):
        raise _bad(index, "a judge's label is a string")
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        raise _bad(index, "a judge's version is a positive integer")
    categories = spec.get("categories") or {}
    if not isinstance(categories, dict) or not all(
        isinstance(k, str)
        and k
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
        for k, v in categories.items()
    ):
        raise _bad(index, "categories map each category's name to a number")
    return Evaluator(
        "llm_judge",
        name,
        prompt=prompt,
        label=label,
        version=version,
        categories={k: float(v) for k, v in categories.items()},
    )
