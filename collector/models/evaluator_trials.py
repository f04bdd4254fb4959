"""``POST /v1/evaluators/try``: run an evaluator on a few records without saving anything
(docs/api-notes.md, "Online evaluation")."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .evaluation import RuleMapping

MAX_TRIAL_RECORDS = 20


class TrialIn(BaseModel):
    """An evaluator object (as ``PUT /v1/evaluators/{name}`` takes), the records to try it
    on, and optionally a rule's mapping (without it, the rule's default mapping)."""

    model_config = ConfigDict(extra="forbid")

    evaluator: dict[str, Any]
    request_ids: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]],
        Field(min_length=1, max_length=MAX_TRIAL_RECORDS),
    ]
    mapping: RuleMapping | None = None


class TrialOut(BaseModel):
    """The evaluator's verdict on one record: ``value`` (null with ``error``), what the
    mapping gave it (``input``, ``output``, ``expected``), and a judge's call: its record
    (``judge_request_id``, in ``promptrail-evaluation``) and ``cost_usd`` (null for a code
    evaluator, and for a judge not called)."""

    request_id: str
    value: Any = None
    reason: str | None = None
    error: str | None = None
    input: Any = None
    output: Any = None
    expected: Any = None
    judge_request_id: str | None = None
    cost_usd: float | None = None
