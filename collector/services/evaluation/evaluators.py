"""Named, versioned evaluators (docs/api-notes.md, "Online evaluation"): section 11's
evaluator objects stored under a name, shared by experiments and rules.

A definition is checked by the experiments' own parser (:func:`..evaluators.parse_evaluators`)
and stored in its checked form, with the score's ``name`` defaulting to the evaluator's name.
Every change makes a new version, numbered from 1; a PUT whose checked definition equals the
newest version's makes none and answers that version.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...errors import EvaluatorNotFound, ValidationFailed
from ...models.evaluation import EVALUATOR_NAME_PATTERN
from ...models.json_values import json_problem
from ...store.evaluation import EvaluationStore, EvaluatorVersionRow
from ..evaluators import parse_evaluators
from ..refused_writes import raise_if_refused

_NAME = re.compile(EVALUATOR_NAME_PATTERN)
# The keys of an evaluator object a message of the parser may be about, in the order checked.
_FIELDS = ("pattern", "prompt", "label", "version", "categories", "name")


class EvaluatorService:
    """Store, read and resolve named evaluators."""

    def __init__(self, store: EvaluationStore, retry_after_seconds: int = 2) -> None:
        self._store = store
        self._retry_after = retry_after_seconds

    def put(self, project: str, name: str, raw: dict[str, Any]) -> tuple[EvaluatorVersionRow, bool]:
        """Store ``raw`` as the next version of ``name`` (unless the newest is the same);
        return the version holding it and whether it is new."""
        definition = check_definition(name, raw)
        row, created, outcome = self._store.put_version(
            project, name, definition, lambda newest: newest == definition
        )
        if outcome is not None:
            raise_if_refused(outcome, self._retry_after, "evaluator version")
        return row, created

    def versions(self, project: str, name: str) -> list[EvaluatorVersionRow]:
        """Every version of ``name``, newest first, or 404 EVALUATOR_NOT_FOUND."""
        versions = self._store.versions(project, name)
        if not versions:
            raise EvaluatorNotFound(name)
        return versions

    def newest(self, project: str) -> list[EvaluatorVersionRow]:
        """Every evaluator of the project at its newest version, by name."""
        return self._store.newest_versions(project)

    def first_created(self, project: str, names: Sequence[str]) -> dict[str, Any]:
        """When each evaluator got its first version."""
        return self._store.first_created(project, list(names))

    def resolve(self, project: str, name: str, version: int | None = None) -> EvaluatorVersionRow:
        """The version ``version`` of ``name`` (its newest without one), or 404
        EVALUATOR_NOT_FOUND naming what is missing."""
        versions = self._store.versions(project, name)
        if not versions:
            raise EvaluatorNotFound(name)
        if version is None:
            return versions[0]
        for row in versions:
            if row.version == version:
                return row
        raise EvaluatorNotFound(name, version)

    def resolve_references(self, project: str, raw: Sequence[Any]) -> list[Any]:
        """An experiment's evaluators with each ``{"evaluator": name, "version"?}`` replaced
        by that stored definition (its newest version without one), marked with the
        ``evaluator`` and ``evaluator_version`` it came from; the others as given."""
        resolved: list[Any] = []
        for index, spec in enumerate(raw):
            if not isinstance(spec, dict) or "evaluator" not in spec:
                resolved.append(spec)
                continue
            extra = set(spec) - {"evaluator", "version"}
            if extra:
                raise ValidationFailed(
                    "evaluators",
                    "a reference to a named evaluator takes evaluator and version only, "
                    f"not {', '.join(sorted(extra))}",
                    index=index,
                )
            name, version = spec["evaluator"], spec.get("version")
            if not isinstance(name, str) or not _NAME.match(name):
                raise ValidationFailed(
                    "evaluators",
                    "evaluator is a named evaluator's name (1-100 letters, digits or _.:-)",
                    index=index,
                )
            if version is not None and (
                isinstance(version, bool) or not isinstance(version, int) or version < 1
            ):
                raise ValidationFailed(
                    "evaluators", "a named evaluator's version is a positive integer", index=index
                )
            row = self.resolve(project, name, version)
            resolved.append(
                {**row.definition, "evaluator": row.name, "evaluator_version": row.version}
            )
        return resolved


def check_definition(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The checked form of an evaluator object stored under ``name``, or 400
    VALIDATION_ERROR naming the field at fault."""
    problem = json_problem(raw, "")
    if problem is not None:  # a lone surrogate, or nesting too deep to store
        field, message = problem
        raise ValidationFailed(field.lstrip(".") or "body", message)
    if "evaluator" in raw or "evaluator_version" in raw:
        raise ValidationFailed("evaluator", "a named evaluator's definition names no evaluator")
    try:
        (parsed,) = parse_evaluators([{"name": name, **raw}])
    except ValidationFailed as exc:
        raise ValidationFailed(_field_of(raw, exc.message), exc.message) from None
    return parsed.as_json()


def _field_of(raw: dict[str, Any], message: str) -> str:
    """The body's field a message of the parser is about (``type`` by default)."""
    for key in _FIELDS:
        if key in message:
            return key
    extra = [key for key in raw if key not in ("type", *_FIELDS)]
    return extra[0] if extra and "takes no" in message else "type"
