"""What the REST client returns for datasets and experiments (re-exported by :mod:`._types`,
which the wire-model test compares with the collector's models)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from ._shape import _Shape

__all__ = [
    "Comparison",
    "Dataset",
    "DatasetItem",
    "Experiment",
    "ExperimentCounts",
    "ExperimentResult",
    "ExperimentSummary",
    "ItemsAccepted",
    "ScoreSummary",
]


class Dataset(_Shape):
    """Hold a dataset: named items to run a prompt version or your code over."""

    id: str
    name: str
    description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    item_count: int = 0
    created_at: datetime | None = None


class DatasetItem(_Shape):
    """Hold one item of a dataset: the variables a run renders, and what it should answer."""

    id: str
    input_variables: dict[str, Any] = Field(default_factory=dict)
    expected_output: str | dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    source_request_id: str | None = None
    created_at: datetime | None = None


class ItemsAccepted(_Shape):
    """Hold how many items a dataset took from the request log."""

    accepted: int


class ExperimentCounts(_Shape):
    """How far an experiment is: ``done`` counts finished results, errors included."""

    items: int = 0
    runs: int = 0
    done: int = 0
    errors: int = 0


class ScoreSummary(_Shape):
    """A score's mean over the results and its 95% confidence interval."""

    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    count: int = 0


class ExperimentSummary(_Shape):
    """An experiment's scores, cost (the judges' apart), tokens and latency p50/p95."""

    scores: dict[str, ScoreSummary] = Field(default_factory=dict)
    estimated_cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    total_tokens: int = 0
    latency_ms: dict[str, float | None] = Field(default_factory=dict)


class Experiment(_Shape):
    """Hold an experiment: a prompt version (or your code) run over a dataset, and how it did."""

    id: str
    name: str
    dataset: str
    status: str
    task: str = "service"
    dataset_id: str | None = None
    prompt_name: str | None = None
    version: int | None = None
    label: str | None = None
    model: str | None = None
    error: str | None = None
    evaluators: list[dict[str, Any]] = Field(default_factory=list)
    repetitions: int = 1
    concurrency: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    counts: ExperimentCounts = Field(default_factory=ExperimentCounts)
    summary: ExperimentSummary = Field(default_factory=ExperimentSummary)
    created_at: datetime | None = None
    completed_at: datetime | None = None


class ExperimentResult(_Shape):
    """One result: an item's run (one repetition), its output and scores."""

    item_id: str
    repetition: int = 1
    request_id: str | None = None
    trace_id: str | None = None
    input_variables: dict[str, Any] = Field(default_factory=dict)
    expected_output: str | dict[str, Any] | None = None
    output: str = ""
    status: str = "success"
    error: str | None = None
    scores: dict[str, Any] = Field(default_factory=dict)
    latency_ms: float | None = None
    estimated_cost_usd: float = 0.0


class Comparison(_Shape):
    """Two experiments paired by item: ``scores[name]`` has base, candidate, delta, ci_low,
    ci_high, improved, regressed, unchanged; ``items`` the largest regression first."""

    scores: dict[str, dict[str, Any]] = Field(default_factory=dict)
    estimated_cost_usd: dict[str, float | None] = Field(default_factory=dict)
    latency_ms: dict[str, float | None] = Field(default_factory=dict)
    unmatched: int = 0
    items: list[dict[str, Any]] = Field(default_factory=list)
    # Not a field of the answer's data: the cursor of the next page of items, from its
    # ``pagination``.
    next_cursor: str | None = None
