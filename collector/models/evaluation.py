"""Wire models of online evaluation (docs/api-notes.md, "Online evaluation"): named,
versioned evaluators, evaluation rules and their decisions."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from .json_values import LONE_SURROGATE, check_json, is_valid_text
from .requests import RecordKind
from .scores import ScoreName

EVALUATOR_NAME_PATTERN = r"^[A-Za-z0-9_.:\-]{1,100}$"
EvaluatorName = Annotated[str, Field(pattern=EVALUATOR_NAME_PATTERN)]
Target = Literal["record", "trace", "session"]
Decision = Literal[
    "scored",
    "not_sampled",
    "waiting",
    "budget_exhausted",
    "rate_limited",
    "connection_blocked",
    "error",
]
DECISIONS: tuple[str, ...] = get_args(Decision)
Text = Annotated[str, Field(min_length=1, max_length=200)]
MetadataValue = str | bool | int | Annotated[float, Field(allow_inf_nan=False)]
WEEK_SECONDS = 7 * 24 * 3600

# The mapping's paths: the record's ``input`` or ``input_variables``, one input variable, the
# output or one of its fields (``output.content`` among them), one metadata value, and a
# session's whole ``transcript`` (checked against the rule's target by the service).
_PATH = re.compile(
    r"^(input|input_variables|output|transcript)$|^(input_variables|output|metadata)\.\S{1,200}$"
)
PATH_GRAMMAR = (
    "input, input_variables, input_variables.<key>, output, output.content, output.<key>, "
    "metadata.<key>, or transcript (sessions)"
)


def check_path(path: str) -> str:
    """Return a mapping path of the grammar, or raise ValueError saying what it may be."""
    if not is_valid_text(path):
        raise ValueError(LONE_SURROGATE)
    if not _PATH.match(path):
        raise ValueError(f"'{path}' is not a mapping path: use {PATH_GRAMMAR}")
    return path


class RuleFilter(BaseModel):
    """Which records (or traces and sessions holding one) a rule judges."""

    model_config = ConfigDict(extra="forbid")

    prompt_name: Text | None = None
    version: Annotated[int, Field(ge=1)] | None = None
    label: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    model: Text | None = None
    kind: RecordKind | None = None
    status: Literal["success", "error"] | None = None
    span_name: Text | None = None
    metadata: Annotated[
        dict[Annotated[str, Field(min_length=1, max_length=200)], MetadataValue],
        AfterValidator(check_json),
    ] = Field(default_factory=dict, max_length=20)


class RuleMapping(BaseModel):
    """Where the evaluator's input, output and expected output come from."""

    model_config = ConfigDict(extra="forbid")

    input: str
    output: str
    expected: str | None = None

    @field_validator("input", "output", "expected")
    @classmethod
    def _grammar(cls, value: str | None) -> str | None:
        return None if value is None else check_path(value)


class RuleIn(BaseModel):
    """``POST /v1/evaluation-rules``: run an evaluator on new production data."""

    model_config = ConfigDict(extra="forbid")

    name: Text
    evaluator: EvaluatorName
    evaluator_version: Annotated[int, Field(ge=1)] | None = None
    target: Target
    filter: RuleFilter = Field(default_factory=RuleFilter)
    sampling: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 1.0
    delay_seconds: Annotated[int, Field(ge=0, le=WEEK_SECONDS)] = 0
    idle_seconds: Annotated[int, Field(ge=0, le=WEEK_SECONDS)] = 120
    mapping: RuleMapping | None = None
    score_name: ScoreName | None = None
    daily_budget_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    max_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    enabled: bool = True


class RulePatch(BaseModel):
    """``PATCH /v1/evaluation-rules/{id}``: each field given replaces the rule's (``filter``
    and ``mapping`` whole); ``null`` resets an optional field to its default."""

    model_config = ConfigDict(extra="forbid")

    name: Text | None = None
    evaluator: EvaluatorName | None = None
    evaluator_version: Annotated[int, Field(ge=1)] | None = None
    target: Target | None = None
    filter: RuleFilter | None = None
    sampling: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    delay_seconds: Annotated[int, Field(ge=0, le=WEEK_SECONDS)] | None = None
    idle_seconds: Annotated[int, Field(ge=0, le=WEEK_SECONDS)] | None = None
    mapping: RuleMapping | None = None
    score_name: ScoreName | None = None
    daily_budget_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    max_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    enabled: bool | None = None


# A PATCH may reset these to their default with null; the others need a value.
NULLABLE_RULE_FIELDS = frozenset(
    {"evaluator_version", "mapping", "score_name", "daily_budget_usd", "max_per_minute"}
)


class EvaluatorVersionOut(BaseModel):
    """One version of a named evaluator."""

    name: str
    version: int
    definition: dict[str, Any] = Field(
        description="The evaluator object of that version (type, name: the score's, and its "
        "fields)."
    )
    created_at: datetime


class EvaluatorOut(BaseModel):
    """A named evaluator: its newest version."""

    name: str
    version: int
    type: str
    definition: dict[str, Any]
    created_at: datetime = Field(description="When its first version was stored.")
    updated_at: datetime = Field(description="When its newest version was stored.")


class EvaluatorDetailOut(EvaluatorOut):
    """A named evaluator with every version, newest first."""

    versions: list[EvaluatorVersionOut]


class BackfillIn(BaseModel):
    """``POST /v1/evaluation-rules/{id}/backfill``: the window of the records' creation
    times, ``from`` included, ``to`` not."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    since: AwareDatetime = Field(alias="from")
    until: AwareDatetime = Field(alias="to")


class BackfillOut(BaseModel):
    """A rule's backfill job."""

    status: Literal["running", "completed", "failed"]
    done: int
    total: int


class RuleOut(BaseModel):
    """An evaluation rule, with its decisions of the last 24 hours counted by kind."""

    id: str
    name: str
    evaluator: str
    evaluator_version: int | None
    target: Target
    filter: dict[str, Any]
    sampling: float
    delay_seconds: int
    idle_seconds: int
    mapping: dict[str, Any] | None
    score_name: str = Field(description="The scores' name (default: the evaluator's name).")
    daily_budget_usd: float | None
    max_per_minute: int | None
    enabled: bool
    counts: dict[str, int] = Field(
        description="The rule's decisions of the last 24 hours by kind (each kind listed)."
    )
    backfill: BackfillOut | None
    created_at: datetime
    updated_at: datetime


class DecisionOut(BaseModel):
    """A rule's decision on one target: why it was scored, or why not."""

    rule_id: str
    target_type: Target
    target_id: str
    decision: Decision
    reason: str
    evaluator: str
    evaluator_version: int
    score_id: str | None
    judge_request_id: str | None
    cost_usd: float | None
    decided_at: datetime
