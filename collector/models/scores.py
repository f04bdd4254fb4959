"""Wire models of scores, score configs and feedback tokens (docs/api-notes.md, "Scores and
feedback")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, model_validator

from promptrail._feedback_token import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from promptrail._score_rules import (
    NAME_MAX_CHARS,
    REQUEST_ID_MAX_CHARS,
    SCORE_ID_PATTERN,
    TRACE_ID_PATTERN,
    DataType,
)
from promptrail._score_rules import infer_data_type as infer_data_type
from promptrail._score_rules import value_problem as value_problem

from .json_values import check_json
from .rows import RowModel

# A score's name, target, id and value follow the SDK's rules (promptrail._score_rules), so the
# SDK drops before queueing what this side would refuse; infer_data_type and value_problem are
# importable from here too.
ScoreDataType = DataType
ScoreSource = Literal["api", "sdk", "annotation", "eval", "end_user"]
# What a client may write: ``end_user`` is only ever set by a feedback token.
ClientSource = Literal["api", "sdk", "annotation", "eval"]

# A value as the contract allows it. ``StrictBool`` first so JSON true stays a boolean (and
# never the number 1); NaN and infinities cannot be stored as JSON, so they are refused.
ScoreValue = StrictBool | int | Annotated[float, Field(allow_inf_nan=False)] | str
ScoreName = Annotated[str, Field(min_length=1, max_length=NAME_MAX_CHARS)]
RequestRef = Annotated[str, Field(min_length=1, max_length=REQUEST_ID_MAX_CHARS)]
TraceRef = Annotated[str, Field(pattern=TRACE_ID_PATTERN)]
# A session is a record's metadata.session_id: any text, as long as its page's path takes.
SESSION_ID_MAX_CHARS = 1000
SessionRef = Annotated[str, Field(min_length=1, max_length=SESSION_ID_MAX_CHARS)]
MAX_TEXT = 100_000


class _Target(BaseModel):
    """A record or a trace (the service checks that exactly one is given)."""

    request_id: RequestRef | None = None
    trace_id: TraceRef | None = None


class ScoreIn(_Target):
    """A score as a client posts it (``POST /v1/scores`` and each item of a batch): on a
    record, a trace or a session (exactly one)."""

    model_config = ConfigDict(extra="forbid")

    session_id: SessionRef | None = None

    id: Annotated[str, Field(pattern=SCORE_ID_PATTERN)] | None = None
    name: ScoreName
    data_type: ScoreDataType | None = None
    value: ScoreValue
    comment: Annotated[str, Field(max_length=MAX_TEXT)] | None = None
    correction: Annotated[str, Field(max_length=MAX_TEXT)] | None = None
    source: ClientSource = "api"
    metadata: Annotated[dict[str, Any], AfterValidator(check_json)] = Field(default_factory=dict)
    created_at: datetime | None = None


class ScoreBatchIn(BaseModel):
    """``POST /v1/scores/batch``: each score is validated alone."""

    scores: list[Any]


class ScoreOut(RowModel):
    """A stored score."""

    id: str
    request_id: str | None
    trace_id: str | None
    session_id: str | None = None
    name: str
    data_type: ScoreDataType
    value: bool | int | float | str
    comment: str | None
    correction: str | None
    source: ScoreSource
    metadata: dict[str, Any]
    created_at: datetime


class ScoreConfigIn(BaseModel):
    """``PUT /v1/score-configs/{name}``: what scores of that name must be."""

    model_config = ConfigDict(extra="forbid")

    data_type: ScoreDataType
    min: Annotated[float, Field(allow_inf_nan=False)] | None = None
    max: Annotated[float, Field(allow_inf_nan=False)] | None = None
    categories: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, max_length=1000
    )
    description: Annotated[str, Field(max_length=10_000)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Any:
        if self.data_type != "numeric" and (self.min is not None or self.max is not None):
            raise ValueError("min and max apply to numeric scores only")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("min must not exceed max")
        if self.data_type != "categorical" and self.categories is not None:
            raise ValueError("categories apply to categorical scores only")
        if self.categories is not None and not self.categories:
            raise ValueError("categories must not be empty")
        return self


class ScoreConfigOut(ScoreConfigIn, RowModel):
    """A stored score config."""

    name: str
    updated_at: datetime


class FeedbackTokenIn(_Target):
    """``POST /v1/scores/tokens``: a token for one record or trace and one name."""

    model_config = ConfigDict(extra="forbid")

    name: ScoreName
    data_type: ScoreDataType | None = None
    categories: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, min_length=1, max_length=100
    )
    ttl_seconds: Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS)] = DEFAULT_TTL_SECONDS

    @model_validator(mode="after")
    def _categories_fit(self) -> Any:
        if self.categories is not None and self.data_type not in (None, "categorical"):
            raise ValueError("categories apply to categorical scores only")
        return self


class FeedbackTokenOut(BaseModel):
    """A minted token, the path to post feedback to, and when it expires."""

    token: str
    url: str
    expires_at: datetime


class FeedbackIn(BaseModel):
    """``POST /v1/feedback/{token}``: an end user's vote."""

    model_config = ConfigDict(extra="forbid")

    value: ScoreValue
    comment: Annotated[str, Field(max_length=MAX_TEXT)] | None = None
    correction: Annotated[str, Field(max_length=MAX_TEXT)] | None = None
