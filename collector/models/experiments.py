"""Wire models of experiments, their results and comparisons (docs/api-notes.md, "Datasets
and experiments")."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .datasets import ItemId
from .json_values import check_json
from .requests import Metadata
from .rows import NoneIfEmpty, RowModel
from .scores import ScoreValue

if TYPE_CHECKING:  # the rows these answers are read from (for the type checker only)
    from ..store.experiments import ExperimentRow

MAX_RESULTS_PER_POST = 1000


class ExperimentIn(BaseModel):
    """``POST /v1/experiments``: a prompt version over a dataset, or (``task: client``) an
    experiment whose results the client's code posts."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    dataset: Annotated[str, Field(min_length=1, max_length=200)]
    task: Literal["service", "client"] = "service"
    prompt: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    version: Annotated[int, Field(ge=1)] | None = None
    label: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    model: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    parameters: Annotated[dict[str, Any], AfterValidator(check_json)] | None = None
    evaluators: Annotated[list[Any], Field(max_length=20)] = Field(default_factory=list)
    repetitions: Annotated[int, Field(ge=1, le=10)] = 1
    concurrency: Annotated[int, Field(ge=1, le=32)] = 4
    metadata: Metadata = Field(default_factory=dict)


class ResultIn(BaseModel):
    """One result of ``POST /v1/experiments/{id}/results`` (each validated alone)."""

    model_config = ConfigDict(extra="forbid")

    item_id: ItemId
    repetition: Annotated[int, Field(ge=1, le=10)] = 1
    output: Annotated[str, Field(max_length=1_000_000)] = ""
    status: Literal["success", "error"] = "success"
    error: Annotated[str, Field(max_length=10_000)] | None = None
    request_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    trace_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    scores: dict[Annotated[str, Field(min_length=1, max_length=100)], ScoreValue] = Field(
        default_factory=dict
    )
    latency_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    estimated_cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class ResultsIn(BaseModel):
    """``POST /v1/experiments/{id}/results``."""

    model_config = ConfigDict(extra="forbid")

    results: Annotated[list[Any], Field(max_length=MAX_RESULTS_PER_POST)]


class Counts(BaseModel):
    """How far an experiment is: results done count errors too."""

    items: int
    runs: int
    done: int
    errors: int


class ScoreSummary(BaseModel):
    """The mean of one score over the results and its 95% confidence interval."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    count: int


class Percentiles(BaseModel):
    """Latency percentiles in ms (None with no result)."""

    p50: float | None
    p95: float | None


class Summary(BaseModel):
    """An experiment's scores, cost, tokens and latency."""

    scores: dict[str, ScoreSummary]
    estimated_cost_usd: float
    judge_cost_usd: float
    total_tokens: int
    latency_ms: Percentiles


class ExperimentOut(BaseModel):
    """An experiment."""

    id: str
    name: str
    dataset: str = Field(description="The dataset's name.")
    dataset_id: str
    task: Literal["service", "client"]
    prompt_name: str | None
    version: int | None
    label: str | None
    model: str | None
    status: Literal["running", "completed", "cancelled", "failed"]
    error: str | None = Field(
        description="Why a failed experiment failed; on a completed one, what went wrong in "
        "some results (a judge that could not give its verdict)."
    )
    evaluators: list[dict[str, Any]]
    repetitions: int
    concurrency: int
    metadata: dict[str, Any]
    counts: Counts
    summary: Summary
    created_at: datetime
    completed_at: datetime | None

    @classmethod
    def of_row(
        cls, row: ExperimentRow, done: int, errors: int, summary: dict[str, Any]
    ) -> ExperimentOut:
        """An experiment as stored, with the counts and summary a read computes: the spec's
        fields (label, error, evaluators, repetitions, concurrency) come from its JSON."""
        spec = row.spec
        return cls(
            id=row.id,
            name=row.name,
            dataset=row.dataset_name,
            dataset_id=row.dataset_id,
            task=row.task,
            prompt_name=row.prompt_name,
            version=row.version,
            label=spec.get("label"),
            model=row.model,
            status=row.status,
            error=spec.get("error"),
            evaluators=spec.get("evaluators", []),
            repetitions=spec.get("repetitions", 1),
            concurrency=spec.get("concurrency", 1),
            metadata=row.metadata,
            counts=Counts(items=row.items, runs=row.runs, done=done, errors=errors),
            summary=Summary.model_validate(summary),
            created_at=row.created_at,
            completed_at=row.completed_at,
        )


class ResultOut(RowModel):
    """One result: an item's run (one repetition), its output and scores."""

    item_id: str
    repetition: int
    request_id: str | None
    trace_id: str | None
    input_variables: dict[str, Any]
    expected_output: str | dict[str, Any] | None
    output: str
    status: Literal["success", "error"]
    error: Annotated[str | None, NoneIfEmpty]
    scores: dict[str, Any]
    latency_ms: float | None
    estimated_cost_usd: float


class CompareScore(BaseModel):
    """One score compared over the paired items."""

    base: float | None
    candidate: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    improved: int
    regressed: int
    unchanged: int


class Triple(BaseModel):
    """A figure of the base, of the candidate, and their difference."""

    base: float | None
    candidate: float | None
    delta: float | None


class Side(BaseModel):
    """One side of a compared item."""

    output: str
    scores: dict[str, Any]


class CompareItem(BaseModel):
    """One item of both experiments; ``delta`` per score (candidate minus base)."""

    item_id: str
    input_variables: dict[str, Any]
    expected_output: str | dict[str, Any] | None
    base: Side
    candidate: Side
    delta: dict[str, float]


class CompareOut(BaseModel):
    """Two experiments paired by item."""

    scores: dict[str, CompareScore]
    estimated_cost_usd: Triple
    latency_ms: Triple
    unmatched: int
    items: list[CompareItem]
