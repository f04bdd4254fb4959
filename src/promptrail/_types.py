"""What the REST client returns: the spec's shapes as pydantic models.

Every model allows extra fields, so a collector that adds a field never breaks an older client
(the extra values are kept and readable as attributes). Fields a route leaves out of its subset
(``Prompt`` from get vs create) default to ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, TypedDict

from pydantic import Field

from ._experiment_types import (
    Comparison,
    Dataset,
    DatasetItem,
    Experiment,
    ExperimentCounts,
    ExperimentResult,
    ExperimentSummary,
    ItemsAccepted,
    ScoreSummary,
)
from ._shape import _Shape

__all__ = [
    "AnalyticsGroup",
    "AnalyticsPeriod",
    "AnalyticsResult",
    "BatchResult",
    "Comparison",
    "Dataset",
    "DatasetItem",
    "Experiment",
    "ExperimentCounts",
    "ExperimentResult",
    "ExperimentSummary",
    "Export",
    "FeedbackToken",
    "HighlightRun",
    "ItemsAccepted",
    "Label",
    "LabelRemoved",
    "Prompt",
    "PromptDeleted",
    "PromptVersion",
    "RejectedRecord",
    "RequestLog",
    "RequestRecord",
    "RequestsDeleted",
    "Rollback",
    "RunResult",
    "Score",
    "ScoreConfig",
    "ScoreSummary",
    "SearchHit",
    "TemplatePayload",
    "TemplateVariable",
    "Usage",
]


class _ChatFields(_Shape):
    # A chat prompt's fields, and those either type may carry (docs/api-notes.md, Chat
    # prompts); a text prompt without them has ``type`` "text" and the rest None. Every
    # version object carries them: a prompt, a version, a rollback's new version.
    type: str = "text"
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    variables_schema: dict[str, Any] | None = None
    config: Any = None
    # The playground run the version was saved from (docs/api-notes.md, Playground).
    source_run_id: str | None = None


class Prompt(_ChatFields):
    """Hold a prompt (spec 2.1); get, list and update fill only their subset of fields."""

    id: str
    name: str
    version: int
    description: str | None = None
    template: str | None = None
    model: str | None = None
    parameters: dict[str, Any] | None = None
    tags: list[str] | None = None
    folder: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class PromptDeleted(_Shape):
    """Hold the outcome of a prompt deletion."""

    deleted: bool
    id: str


class PromptVersion(_ChatFields):
    """Hold one version of a prompt (spec 2.2); ``parameters`` only on a single version."""

    version: int
    template: str | None  # None for a chat prompt (its content is ``messages``)
    model: str
    created_at: datetime
    labels: list[str] = Field(default_factory=list)
    note: str | None = None
    parameters: dict[str, Any] | None = None


class Rollback(_ChatFields):
    """Hold the new version a rollback made, with the note naming both versions."""

    version: int
    template: str | None  # None for a chat prompt (its content is ``messages``)
    note: str


class Label(_Shape):
    """Hold a label and the version it points at."""

    label: str
    version: int
    updated_at: datetime


class LabelRemoved(_Shape):
    """Hold the outcome of a label removal."""

    deleted: bool
    label: str


class TemplateVariable(_Shape):
    """Describe one template variable (a chat prompt's also says whether it is required)."""

    type: str = "string"
    required: bool | None = None


class _TemplateFields(_Shape):
    """The template payload's fields but ``messages`` (a :class:`PromptTemplate` keeps a chat
    prompt's as ``message_templates``: its ``messages()`` builds a call's messages)."""

    prompt_id: str
    prompt_name: str
    version: int
    version_id: str
    type: str = "text"
    content: str | None
    placeholders: list[str] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    config: Any = None
    variables: dict[str, TemplateVariable] = Field(default_factory=dict)
    provider: str
    model: str
    temperature: float | None = None
    max_tokens: int | None = None


class TemplatePayload(_TemplateFields):
    """Hold a template for local execution (spec 2.3).

    A text prompt's ``content`` uses ``{{var}}``; a chat prompt's (``type`` ``"chat"``) is
    None, and ``messages`` hold its unrendered Mustache messages and placeholders
    (docs/api-notes.md, Chat prompts).
    """

    messages: list[dict[str, Any]] | None = None


class Usage(_Shape):
    """Hold token counts and estimated cost; lists carry only the totals."""

    total_tokens: int = 0
    estimated_cost_usd: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Inside prompt_tokens (cache reads and writes) and completion_tokens (reasoning); details
    # and runs carry them, lists do not (0 there, as for a call without any).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class RunResult(_Shape):
    """Hold the result of a run on the collector (spec 2.4)."""

    id: str
    output: str
    prompt_name: str
    version: int
    model: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    # False when the model has no known price (the cost is then 0); None from older collectors.
    cost_known: bool | None = None
    latency_ms: int
    created_at: datetime
    # A chat prompt's run (None for a text prompt's): why the model stopped (stop, length or
    # tool_calls), and the tools it called, each {"id", "name", "arguments" (JSON text)}.
    finish_reason: str | None = None
    tool_calls: list[dict[str, str]] | None = None


class Timing(_Shape):
    """Hold where the time of a call went."""

    total_latency_ms: int = 0
    pre_process_ms: int = 0
    llm_call_ms: int = 0
    post_process_ms: int = 0


class Integration(_Shape):
    """Hold what ran around the model call."""

    pre_process_executed: bool = False
    post_process_executed: bool = False
    errors: list[Any] = Field(default_factory=list)


class Score(_Shape):
    """Hold a score (docs/api-notes.md, "Scores and feedback"): a judgement of one record
    (``request_id``), one trace or one session.

    ``value`` comes back as it was given: a number, True/False, or a category's text.
    """

    id: str
    name: str
    value: bool | int | float | str
    data_type: str
    request_id: str | None = None
    trace_id: str | None = None
    session_id: str | None = None
    comment: str | None = None
    correction: str | None = None
    source: str = "api"
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None


class Evaluation(_Shape):
    """Hold an online evaluation rule's decision on a record or a trace, with its reason
    (docs/api-notes.md, "Online evaluation"): why it was scored, or why not."""

    rule_id: str
    evaluator: str
    evaluator_version: int
    decision: str
    reason: str
    decided_at: datetime
    score_id: str | None = None
    judge_request_id: str | None = None
    cost_usd: float | None = None


class RequestRecord(_Shape):
    """Hold a request record (spec 2.5): a list item, or the detail with model and timing."""

    id: str
    created_at: datetime
    prompt_name: str = ""
    version: int | None = None
    status: str = "success"
    input_variables: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    latency_ms: int | None = None
    model: str | None = None
    provider: str | None = None
    timing: Timing | None = None
    integration: Integration | None = None
    input: Any = None
    error: str | None = None
    time_to_first_token_ms: int | None = None
    cost_known: bool | None = None
    trace_id: str | None = None
    span_id: str | None = None
    parent_span_id: str | None = None
    span_name: str | None = None
    # llm (a model call), embedding, or a span kind: chain, agent, tool, retriever, span.
    kind: str = "llm"
    # Where it was logged (``promptrail.init(environment=)``); promptrail-... is the service's.
    environment: str = "production"
    # The detail: the score objects on the record and its trace, newest first. A list item:
    # per score name, the mean (numeric, boolean as 1/0) or the newest category.
    scores: list[Score] | dict[str, bool | int | float | str] = Field(default_factory=list)
    # The detail: each online evaluation rule's decision on the record, with its reason.
    evaluations: list[Evaluation] = Field(default_factory=list)


ScoreMeans = dict[str, bool | int | float | str]


class Environment(_Shape):
    """Hold an environment of the project's records and how many it holds."""

    name: str
    records: int


class Trace(_Shape):
    """Hold a trace (docs/api-notes.md, "Traces, sessions and users"): its root's name and sums
    over all its records.

    From ``client.traces.get`` it holds every record of the trace (``items``), oldest first;
    list items leave ``items`` empty.
    """

    trace_id: str
    name: str = ""
    started_at: datetime
    duration_ms: int = 0
    records: int = 0
    llm_calls: int = 0
    errors: int = 0
    total_tokens: int = 0
    estimated_cost_usd: float = 0.0
    user_id: str | None = None
    session_id: str | None = None
    scores: ScoreMeans = Field(default_factory=dict)
    items: list[RequestRecord] = Field(default_factory=list)
    # The detail: each online evaluation rule's decision on the trace, with its reason.
    evaluations: list[Evaluation] = Field(default_factory=list)


class Session(_Shape):
    """Hold a session (docs/api-notes.md, "Traces, sessions and users"): the records sharing a
    ``metadata.session_id``.

    From ``client.sessions.get`` it holds its records (``items``), oldest first.
    """

    session_id: str
    user_ids: list[str] = Field(default_factory=list)
    first_at: datetime
    last_at: datetime
    records: int = 0
    errors: int = 0
    total_tokens: int = 0
    estimated_cost_usd: float = 0.0
    scores: ScoreMeans = Field(default_factory=dict)
    items: list[RequestRecord] = Field(default_factory=list)
    evaluations: list[Evaluation] = Field(default_factory=list)


class User(_Shape):
    """Hold a user's totals (docs/api-notes.md, "Traces, sessions and users"): the records sharing
    a ``metadata.user_id``."""

    user_id: str
    first_at: datetime
    last_at: datetime
    records: int = 0
    sessions: int = 0
    errors: int = 0
    total_tokens: int = 0
    estimated_cost_usd: float = 0.0


class RejectedRecord(_Shape):
    """Hold a record of a batch that was not stored, and the error body saying why."""

    index: int
    error: dict[str, Any]


class BatchResult(_Shape):
    """Hold the outcome of a batch: how many records were stored, which were rejected."""

    accepted: int
    rejected: list[RejectedRecord] = Field(default_factory=list)


class RequestsDeleted(_Shape):
    """Hold how many records a delete by metadata removed."""

    deleted_count: int
    deleted_at: datetime


class HighlightRun(_Shape):
    """Hold a piece of a highlighted snippet: plain text, a match of the query or not."""

    text: str
    match: bool


class SearchHit(_Shape):
    """Hold a search hit (spec 2.6): matched field paths and ``<em>`` highlights.

    ``highlight_runs`` gives each snippet as runs of plain text (joined, the snippet; a run
    with ``match`` is what ``highlights`` puts in ``<em>``), for display without HTML.
    """

    id: str
    prompt_name: str = ""
    matched_fields: list[str] = Field(default_factory=list)
    highlights: dict[str, str] = Field(default_factory=dict)
    highlight_runs: dict[str, list[HighlightRun]] = Field(default_factory=dict)
    created_at: datetime


class Export(_Shape):
    """Hold an export job (spec 2.7): ``download_url`` is set once ``status`` is completed."""

    export_id: str
    status: str
    download_url: str | None = None
    created_at: datetime
    format: str | None = None
    row_count: int | None = None
    error: str | None = None


class AnalyticsGroup(_Shape):
    """Hold one group of an analytics result (latency adds p50, p95, p99)."""

    name: str
    value: float
    count: int
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class AnalyticsPeriod(_Shape):
    """Hold the period an analytics query covered."""

    start: datetime
    end: datetime


class AnalyticsResult(_Shape):
    """Hold an analytics result (spec 2.8)."""

    metric: str
    total: float
    groups: list[AnalyticsGroup] = Field(default_factory=list)
    period: AnalyticsPeriod
    # metric=cost only: records with no known price, counted as 0 in the total.
    cost_unknown_records: int | None = None
    # metric=score only: how many scores the total is the mean of.
    score_count: int | None = None


class ScoreConfig(_Shape):
    """Hold the rule a score name's values must follow (type, range, categories)."""

    name: str
    data_type: str
    min: float | None = None
    max: float | None = None
    categories: list[str] | None = None
    description: str | None = None
    updated_at: datetime | None = None


class FeedbackToken(_Shape):
    """Hold a feedback token: what an end user's browser posts a score with, no API key.

    ``url`` is the path ``/v1/feedback/{token}`` (join it to the collector's public URL).
    """

    token: str
    url: str
    expires_at: datetime


class RequestLog(TypedDict, total=False):
    """Name the fields of a record to log (``client.requests.log(**fields)``); all optional.

    ``id`` (``req_...``) makes a retry idempotent; ``created_at`` keeps the call's own time;
    ``output`` is a JSON object or a string (stored as ``{"content": ...}``); ``trace_id``
    (32 hex), ``span_id`` and ``parent_span_id`` (16 hex) and ``span_name`` place the call in a
    trace.
    """

    id: str
    created_at: datetime | str
    prompt_name: str
    version: int
    model: str
    provider: str
    status: Literal["success", "error"]
    input_variables: Mapping[str, Any]
    input: Any
    output: Mapping[str, Any] | str
    metadata: Mapping[str, Any]
    usage: Mapping[str, Any]
    latency_ms: int
    time_to_first_token_ms: int
    timing: Mapping[str, Any]
    integration: Mapping[str, Any]
    error: str
    trace_id: str
    span_id: str
    parent_span_id: str
    span_name: str
    kind: Literal["llm", "embedding", "chain", "agent", "tool", "retriever", "span"]
    environment: str
