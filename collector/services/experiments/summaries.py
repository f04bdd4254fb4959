"""An experiment's counts and summary, computed from its stored results on every read.

Never kept as running totals: an experiment stopped part way (cancelled, or its collector
stopped) reads as exactly the results it stored. A score's interval is cut to the score's
scale where the scale is known (:class:`ScoreScales`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...store.experiments import ExperimentRow, SummaryFigures
from ..intervals import MeanInterval, interval_of, within
from ..scores import ScoreService


@dataclass(frozen=True)
class Computed:
    """What a read adds to an experiment's row: its counts and summary."""

    done: int
    errors: int
    summary: dict[str, Any]


def score_number(value: Any) -> float | None:
    """A score value as a mean counts it (true = 1); None for text."""
    if isinstance(value, bool | int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _interval(found: MeanInterval) -> dict[str, Any]:
    return {
        "mean": found.mean,
        "ci_low": found.ci_low,
        "ci_high": found.ci_high,
        "count": found.count,
    }


def summary_of(
    figures: SummaryFigures, bounds: dict[str, tuple[float, float]] | None = None
) -> dict[str, Any]:
    """An experiment's summary: per numeric score its mean and 95% interval (within the
    score's scale, where ``bounds`` knows it), the cost (task and judge apart), the tokens,
    and the latency p50/p95 of the successful results."""
    scale = bounds or {}
    return {
        "scores": {
            name: _interval(
                within(interval_of(mean, sd, count), *scale[name])
                if name in scale
                else interval_of(mean, sd, count)
            )
            for name, (mean, sd, count) in figures.scores.items()
        },
        "estimated_cost_usd": figures.estimated_cost_usd,
        "judge_cost_usd": figures.judge_cost_usd,
        "total_tokens": figures.total_tokens,
        "latency_ms": {"p50": figures.latency_p50, "p95": figures.latency_p95},
    }


EMPTY_SUMMARY = summary_of(SummaryFigures(0, 0, 0.0, 0.0, 0, None, None, {}))


class ScoreScales:
    """The scale of each score name whose scale is known: [0, 1] for booleans and the
    ``similarity`` evaluator, a score config's min and max; other names have none."""

    def __init__(self, scores: ScoreService) -> None:
        self._scores = scores

    def of(
        self,
        project: str,
        experiments: Sequence[ExperimentRow],
        names: Iterable[str],
        booleans: frozenset[str],
    ) -> dict[str, tuple[float, float]]:
        """Return ``{name: (low, high)}`` for the names of ``experiments`` with a known scale."""
        bounds = dict.fromkeys(booleans, (0.0, 1.0))
        for experiment in experiments:
            for evaluator in experiment.spec.get("evaluators") or []:
                if evaluator.get("type") == "similarity" and evaluator.get("name"):
                    bounds[str(evaluator["name"])] = (0.0, 1.0)
        unknown = {name for name in names if name not in bounds}
        if not unknown:
            return bounds
        for config in self._scores.configs(project):
            if config.name not in unknown:
                continue
            if config.data_type == "boolean":
                bounds[config.name] = (0.0, 1.0)
            elif config.min is not None and config.max is not None:
                bounds[config.name] = (config.min, config.max)
        return bounds
