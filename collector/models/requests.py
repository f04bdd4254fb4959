"""Request record, search hit, export and analytics shapes (spec 2.5-2.8, 4.5)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from .json_values import check_json
from .rows import NoneIfEmpty, RowModel
from .scores import ScoreOut

if TYPE_CHECKING:  # the rows these answers are read from (for the type checker only)
    from ..store.exports import ExportJob
    from ..store.request_rows import RequestRow
    from ..store.score_rows import ScoreRow

# Filters by metadata: any JSON values, compared as text (checked: they become query parameters).
MetadataFilter = Annotated[dict[str, Any], AfterValidator(check_json)]
RequestId = Annotated[str, Field(pattern=r"^req_[A-Za-z0-9_\-]{1,64}$")]
Count = Annotated[int, Field(ge=0, le=2**32 - 1)]
# What a record is (docs/api-notes.md, "Traces, sessions and users"): a model call, an embedding,
# or a span of the trace's shape.
RecordKind = Literal["llm", "embedding", "chain", "agent", "tool", "retriever", "span"]
RECORD_KINDS: tuple[str, ...] = get_args(RecordKind)
# The kinds the request log shows unless ``kind=`` asks for others: the model calls.
MODEL_CALL_KINDS = ("llm", "embedding")

# Environments (docs/api-notes.md, Environments): names of 1-40 of [a-z0-9_-]; the service's
# own traffic takes the reserved ``promptrail-…`` ones, which every view hides by default.
ENVIRONMENT_PATTERN = r"^[a-z0-9_-]{1,40}$"
DEFAULT_ENVIRONMENT = "production"
RESERVED_ENVIRONMENT_PREFIX = "promptrail-"
EXPERIMENT_ENVIRONMENT = "promptrail-experiment"
PLAYGROUND_ENVIRONMENT = "promptrail-playground"
EVALUATION_ENVIRONMENT = "promptrail-evaluation"


def _client_environment(value: str) -> str:
    if value.startswith(RESERVED_ENVIRONMENT_PREFIX):
        raise ValueError(
            f"environment names starting with {RESERVED_ENVIRONMENT_PREFIX!r} are reserved "
            "for the service's own traffic"
        )
    return value


# The environment a client logs under: any name but the reserved ones.
ClientEnvironment = Annotated[
    str, Field(pattern=ENVIRONMENT_PATTERN), AfterValidator(_client_environment)
]


def _metadata_keys(value: dict[str, Any]) -> dict[str, Any]:
    if len(value) > 100:
        raise ValueError("metadata holds at most 100 keys")
    if any(not key or len(key) > 128 for key in value):
        raise ValueError("metadata keys must be 1-128 characters")
    return value


# A record's metadata, and a run's (stored as a record): at most 100 keys of 1-128 characters.
Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_keys)]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageIn(_Input):
    """Token usage and cost of one call."""

    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    total_tokens: Count | None = None
    estimated_cost_usd: Annotated[float, Field(ge=0)] | None = Field(
        default=None, description="Kept as sent; without it the collector prices the call."
    )
    cached_tokens: Count | None = Field(
        default=None, description="Prompt tokens read from the provider's cache (in prompt_tokens)."
    )
    reasoning_tokens: Count | None = Field(
        default=None, description="Completion tokens spent reasoning (in completion_tokens)."
    )
    cache_write_tokens: Count | None = Field(
        default=None,
        description="Prompt tokens written to the provider's cache (in prompt_tokens).",
    )


class TimingIn(_Input):
    """Where the time of one call went."""

    total_latency_ms: Count | None = None
    pre_process_ms: Count = 0
    llm_call_ms: Count = 0
    post_process_ms: Count = 0


class IntegrationIn(_Input):
    """What ran around the model call."""

    pre_process_executed: bool = False
    post_process_executed: bool = False
    errors: list[Any] = Field(default_factory=list)


class RequestRecordIn(_Input):
    """One record a client logs (``POST /v1/requests``, an item of a batch)."""

    id: RequestId | None = Field(
        default=None, description="Client-chosen id: makes retries idempotent."
    )
    created_at: datetime | None = Field(
        default=None, description="Defaults to the time of logging."
    )
    prompt_name: Annotated[str, Field(max_length=128)] = ""
    version: Annotated[int, Field(ge=1, le=2**31)] | None = None
    model: Annotated[str, Field(max_length=200)] = ""
    provider: Annotated[str, Field(max_length=64)] = ""
    status: Literal["success", "error"] = "success"
    input_variables: dict[str, Any] = Field(default_factory=dict)
    input: Any = Field(
        default=None, description="The call's input: messages, or a Responses/embeddings input."
    )
    output: dict[str, Any] | str | None = None
    metadata: Metadata = Field(default_factory=dict)
    usage: UsageIn = Field(default_factory=UsageIn)
    latency_ms: Count | None = None
    time_to_first_token_ms: Count | None = None
    timing: TimingIn | None = None
    integration: IntegrationIn | None = None
    error: Annotated[str, Field(max_length=100_000)] | None = None
    trace_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = Field(
        default=None, description="Trace of the call (32 hex), when captured from a trace."
    )
    span_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = None
    parent_span_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = None
    span_name: Annotated[str, Field(max_length=256)] | None = None
    kind: RecordKind = Field(
        default="llm",
        description="llm (a model call), embedding, or a span kind: chain, agent, tool, "
        "retriever, span. The request log lists llm and embedding records unless asked.",
    )
    environment: ClientEnvironment = Field(
        default=DEFAULT_ENVIRONMENT,
        description="Where the call ran: 1-40 of [a-z0-9_-]; promptrail-... names are the "
        "service's own.",
    )


class RequestBatchIn(BaseModel):
    """``POST /v1/requests/batch``: records are validated one by one (see ``rejected``)."""

    records: list[Any]


class ValidRequestBatch(BaseModel):
    """A batch whose every record is valid: read in one pass (otherwise record by record)."""

    records: list[RequestRecordIn]


class RejectedRecord(BaseModel):
    """A record of a batch that was not stored, and why."""

    index: int
    error: dict[str, Any]


class BatchResult(BaseModel):
    """Outcome of a batch."""

    accepted: int
    rejected: list[RejectedRecord]


class UsageOut(RowModel):
    """Usage in list items."""

    total_tokens: int
    estimated_cost_usd: float


class UsageDetailOut(UsageOut):
    """Usage in the detail."""

    prompt_tokens: int
    completion_tokens: int
    # Counted inside prompt_tokens (cache reads, cache writes) and completion_tokens.
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class TimingOut(RowModel):
    """Timing breakdown."""

    total_latency_ms: int
    pre_process_ms: int
    llm_call_ms: int
    post_process_ms: int

    @classmethod
    def of_record(cls, row: RequestRow) -> TimingOut:
        """A record's timing: its ``latency_ms`` is the total."""
        return cls.of(row, total_latency_ms=row.latency_ms)


class IntegrationOut(BaseModel):
    """Integration block."""

    pre_process_executed: bool
    post_process_executed: bool
    errors: list[Any]

    @classmethod
    def of_record(cls, integration: Mapping[str, Any]) -> IntegrationOut:
        """A record's integration block as stored (a JSON object; absent keys are false/[])."""
        return cls(
            pre_process_executed=bool(integration.get("pre_process_executed", False)),
            post_process_executed=bool(integration.get("post_process_executed", False)),
            errors=list(integration.get("errors", [])),
        )


class RequestListItem(RowModel):
    """A record in lists (spec 2.5)."""

    id: str
    prompt_name: str
    version: Annotated[int | None, NoneIfEmpty]
    model: str
    status: str
    input_variables: dict[str, Any]
    output: dict[str, Any]
    metadata: dict[str, Any]
    usage: UsageOut
    latency_ms: int
    created_at: datetime
    cost_known: bool = Field(
        description="False when the model has no known price (estimated_cost_usd is then 0)."
    )
    trace_id: Annotated[str | None, NoneIfEmpty] = Field(
        default=None, description="Trace of the call, if any."
    )
    span_id: Annotated[str | None, NoneIfEmpty] = None
    parent_span_id: Annotated[str | None, NoneIfEmpty] = None
    span_name: Annotated[str | None, NoneIfEmpty] = None
    kind: str = Field(
        default="llm", description="llm, embedding, chain, agent, tool, retriever or span."
    )
    environment: str = Field(
        default=DEFAULT_ENVIRONMENT, description="The environment the record was logged in."
    )
    scores: dict[str, bool | int | float | str] = Field(
        default_factory=dict,
        description="Per score name, of the record's and its trace's scores: the mean of the "
        "numeric and boolean ones (true = 1), the newest value of a categorical one.",
    )

    @classmethod
    def of_record(
        cls, row: RequestRow, scores: dict[str, bool | int | float | str] | None = None
    ) -> RequestListItem:
        """A record as lists show it, with its score summary (``ScoreService.summaries``)."""
        return cls.of(row, scores=scores or {}, usage=UsageOut.of(row))


class EvaluationOut(BaseModel):
    """A rule's decision on a record, trace or session, as its detail shows it
    (docs/api-notes.md, "Online evaluation")."""

    rule_id: str
    evaluator: str
    evaluator_version: int
    decision: str
    reason: str
    score_id: str | None = None
    judge_request_id: str | None = None
    cost_usd: float | None = None
    decided_at: datetime


class RequestDetail(RowModel):
    """One record (spec 2.5 detail), with what captured calls add."""

    id: str
    prompt_name: str
    version: Annotated[int | None, NoneIfEmpty]
    status: str
    input_variables: dict[str, Any]
    output: dict[str, Any]
    metadata: dict[str, Any]
    usage: UsageDetailOut
    created_at: datetime
    model: str
    timing: TimingOut
    integration: IntegrationOut
    provider: Annotated[str | None, NoneIfEmpty] = None
    input: Any = None
    error: Annotated[str | None, NoneIfEmpty] = None
    time_to_first_token_ms: int | None = None
    cost_known: bool
    trace_id: Annotated[str | None, NoneIfEmpty] = None
    span_id: Annotated[str | None, NoneIfEmpty] = None
    parent_span_id: Annotated[str | None, NoneIfEmpty] = None
    span_name: Annotated[str | None, NoneIfEmpty] = None
    kind: str = Field(
        default="llm", description="llm, embedding, chain, agent, tool, retriever or span."
    )
    environment: str = Field(
        default=DEFAULT_ENVIRONMENT, description="The environment the record was logged in."
    )
    scores: list[ScoreOut] = Field(
        default_factory=list,
        description="The scores on the record and on its trace, newest first.",
    )
    evaluations: list[EvaluationOut] = Field(
        default_factory=list,
        description="Each evaluation rule's decision on the record, with its reason.",
    )

    @classmethod
    def of_record(
        cls, row: RequestRow, scores: Sequence[ScoreRow] = (), evaluations: Sequence[Any] = ()
    ) -> RequestDetail:
        """A record as its detail (and the answer of a log) shows it, with its scores and
        its evaluations (decision rows)."""
        return cls.of(
            row,
            scores=[ScoreOut.of(s) for s in scores],
            evaluations=[
                EvaluationOut.model_validate(e, from_attributes=True) for e in evaluations
            ],
            usage=UsageDetailOut.of(row),
            timing=TimingOut.of_record(row),
            integration=IntegrationOut.of_record(row.integration),
        )


class EnvironmentOut(BaseModel):
    """An environment of the project's records (``GET /v1/environments``)."""

    name: str
    records: int


class HighlightRun(BaseModel):
    """A piece of a highlighted snippet: plain (unescaped) text, a match of the query or not."""

    text: str
    match: bool


# A matched field's text runs, as the search service gives them (``{"text", "match"}`` each).
_Runs = TypeVar("_Runs", bound=Sequence[Mapping[str, Any]])


class SearchHit(RowModel):
    """Spec 2.6, plus each highlight as text runs (for building text nodes, not HTML)."""

    id: str
    prompt_name: str
    matched_fields: list[str]
    highlights: dict[str, str]
    highlight_runs: dict[str, list[HighlightRun]] = Field(
        description="The snippets of ``highlights`` as runs of plain text: joined, the runs "
        "give the snippet; a run with match true is what ``highlights`` puts in <em>."
    )
    created_at: datetime

    @classmethod
    def of_runs(
        cls, row: RequestRow, runs: Mapping[str, _Runs], html: Callable[[_Runs], str]
    ) -> SearchHit:
        """A hit on ``row``: each matched field's snippet as text runs, and as the HTML
        ``html`` makes of them (the spec's ``highlights``)."""
        return cls.of(
            row,
            matched_fields=list(runs),
            highlights={path: html(field_runs) for path, field_runs in runs.items()},
            highlight_runs=runs,
        )


class ExportFilters(_Input):
    """Filters of an export (spec 4.5 keys, plus the list's)."""

    prompt_name: str | None = None
    status: Literal["success", "error"] | None = None
    model: str | None = None
    start_date: str | None = None
    end_date: str | None = None
    metadata: MetadataFilter = Field(default_factory=dict)
    kind: Annotated[str, Field(max_length=200)] | None = Field(
        default=None,
        description="Record kinds, comma-separated, or all; default: llm,embedding (the list's).",
    )
    environment: Annotated[str, Field(max_length=2000)] | None = Field(
        default=None,
        description="Environments, comma-separated, or all; default: every one but the "
        "service's own (the list's).",
    )
    scores: dict[str, Annotated[str, Field(max_length=200)] | float] = Field(
        default_factory=dict,
        max_length=20,
        description="Score filters as the list takes them: score.<name>.min / .max / "
        "score.<name> / unscored, given as keys of the filters object.",
    )

    @model_validator(mode="before")
    @classmethod
    def _score_keys(cls, data: Any) -> Any:
        # ``score.<name>…`` and ``unscored`` keys sit beside the others, as on the list.
        if isinstance(data, dict):
            moved = {k: v for k, v in data.items() if k.startswith("score.") or k == "unscored"}
            if moved:
                data = {k: v for k, v in data.items() if k not in moved}
                data["scores"] = {**data.get("scores", {}), **moved}
        return data


class ExportCreate(_Input):
    """``POST /v1/requests/export``."""

    format: Literal["csv", "json"] = "csv"
    filters: ExportFilters = Field(default_factory=ExportFilters)
    include_metadata: bool = True


class ExportOut(RowModel):
    """Spec 2.7, plus what a client wants to know of a finished or failed job."""

    export_id: str
    status: str
    download_url: str | None
    created_at: datetime
    format: str
    row_count: int | None = None
    error: Annotated[str | None, NoneIfEmpty] = None

    @classmethod
    def of_job(cls, job: ExportJob, download_url: Callable[[str], str]) -> ExportOut:
        """An export job; its ``download_url`` (built by the route) and ``row_count`` only
        once the file is ready."""
        completed = job.status == "completed"
        return cls.of(
            job,
            download_url=download_url(job.export_id) if completed else None,
            row_count=job.row_count if completed else None,
        )


class DeleteRequestsIn(BaseModel):
    """``DELETE /v1/requests``."""

    metadata: MetadataFilter | None = None


class DeleteResult(BaseModel):
    """Deletion outcome."""

    deleted_count: int
    deleted_at: datetime


def _level(name: str, index: int) -> Any:
    # A group row keeps its percentiles as one (p50, p95, p99) triple, absent but for latency.
    return Field(default=None, validation_alias=AliasChoices(name, AliasPath("percentiles", index)))


class AnalyticsGroup(RowModel):
    """One group of an analytics result (latency adds percentiles)."""

    name: str
    value: float
    count: int
    p50: float | None = _level("p50", 0)
    p95: float | None = _level("p95", 1)
    p99: float | None = _level("p99", 2)


class Period(RowModel):
    """Resolved period of an analytics query."""

    start: datetime
    end: datetime


class AnalyticsResult(RowModel):
    """Spec 2.8, plus for ``cost`` how many records of the period had no known price."""

    metric: Literal["cost", "usage", "latency", "errors", "score"]
    total: float
    groups: list[AnalyticsGroup]
    period: Period
    cost_unknown_records: int | None = Field(
        default=None,
        description="metric=cost only: records of the period (and filters) whose model has "
        "no known price, counted as 0 in the total.",
    )
    score_count: int | None = Field(
        default=None, description="metric=score only: how many scores the total is the mean of."
    )
