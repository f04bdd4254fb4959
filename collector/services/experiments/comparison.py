"""Two experiments paired by item: per score the paired means and the 95% interval of the
mean delta, cost and latency side by side, and the items with the largest regression first
(paged).

The figures of two finished experiments cannot change any more (posting results needs a
running experiment), so they are kept in memory, the most recently read ones first: paging
through a comparison computes it once.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...store.experiments import (
    CompareFigures,
    ExperimentRow,
    ExperimentStore,
    ResultRow,
    SummaryFigures,
)
from ..cursors import CursorCodec
from ..intervals import interval_of, within
from .summaries import ScoreScales, score_number, summary_of

# At most this many paired item ids kept in all (an id and its list slot: ~100 bytes; ~20 MiB).
_COMPARED_ITEMS_KEPT = 200_000

_Figures = tuple[CompareFigures, SummaryFigures, SummaryFigures]


@dataclass(frozen=True)
class ComparePage:
    """A comparison and the cursor of its next page of items."""

    data: dict[str, Any]
    next_cursor: str | None


class Comparison:
    """Compare two experiments; keep the figures of finished pairs."""

    def __init__(self, store: ExperimentStore, scales: ScoreScales, cursor_secret: str) -> None:
        self._store = store
        self._scales = scales
        self._cursors = CursorCodec(cursor_secret, "comparison")
        self._cache: OrderedDict[tuple[str, str, str], _Figures] = OrderedDict()
        self._lock = threading.Lock()

    def offset(self, cursor: str | None) -> int:
        """The position in the paired items a cursor of :meth:`page` stands for."""
        return self._cursors.after(cursor, lambda position: int(position["offset"])) or 0

    def page(
        self,
        project: str,
        base: ExperimentRow,
        candidate: ExperimentRow,
        offset: int,
        limit: int,
    ) -> ComparePage:
        """Pair two experiments' results by item; regressions first (``limit`` items from
        ``offset``)."""
        finished = base.status != "running" and candidate.status != "running"
        figures, base_figures, candidate_figures = self._figures(project, base, candidate, finished)
        page = figures.order[offset : offset + limit]
        left, right = summary_of(base_figures), summary_of(candidate_figures)
        bounds = self._scales.of(project, [base, candidate], figures.scores, figures.booleans)
        data = {
            "scores": {
                name: _compared(*values, bounds.get(name))
                for name, values in figures.scores.items()
            },
            "estimated_cost_usd": _triple(left["estimated_cost_usd"], right["estimated_cost_usd"]),
            "latency_ms": _triple(left["latency_ms"]["p50"], right["latency_ms"]["p50"]),
            "unmatched": figures.unmatched,
            # Only the page's items are read whole (variables, expected output, outputs).
            "items": _page_items(
                page,
                _by_item(self._store.of_items(project, base.id, page)),
                _by_item(self._store.of_items(project, candidate.id, page)),
            ),
        }
        more = offset + limit < figures.paired
        next_cursor = self._cursors.encode({"offset": offset + limit}) if more else None
        return ComparePage(data, next_cursor)

    def _figures(
        self, project: str, base: ExperimentRow, candidate: ExperimentRow, finished: bool
    ) -> _Figures:
        """The figures of a comparison; kept when both experiments are finished."""
        key = (project, base.id, candidate.id)
        with self._lock:
            kept = self._cache.get(key)
            if kept is not None:
                self._cache.move_to_end(key)
                return kept
        figures = (
            self._store.compare_figures(project, base.id, candidate.id),
            self._summary(project, base),
            self._summary(project, candidate),
        )
        if finished:
            with self._lock:
                self._cache[key] = figures
                kept_items = sum(len(f[0].order) for f in self._cache.values())
                while kept_items > _COMPARED_ITEMS_KEPT and self._cache:
                    kept_items -= len(self._cache.popitem(last=False)[1][0].order)
        return figures

    def _summary(self, project: str, experiment: ExperimentRow) -> SummaryFigures:
        """An experiment's cost and latency (its per-score figures are the comparison's)."""
        traced = experiment.task == "client"
        return self._store.summary_figures(project, experiment.id, with_scores=False, traced=traced)


def _compared(
    base: float,
    candidate: float,
    delta: float,
    sd: float,
    pairs: int,
    improved: int,
    regressed: int,
    scale: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One score of a comparison: the paired means and the interval of the mean delta
    (within what a delta can be, where the score's ``scale`` is known)."""
    interval = interval_of(delta, sd, pairs)
    if scale is not None:
        width = scale[1] - scale[0]
        interval = within(interval, -width, width)
    return {
        "base": base,
        "candidate": candidate,
        "delta": interval.mean,
        "ci_low": interval.ci_low,
        "ci_high": interval.ci_high,
        "improved": improved,
        "regressed": regressed,
        "unchanged": pairs - improved - regressed,
    }


@dataclass
class _ItemSide:
    """One experiment's results of one item: repetitions averaged per score."""

    first: ResultRow
    numbers: dict[str, list[float]]

    def means(self) -> dict[str, float]:
        return {name: math.fsum(v) / len(v) for name, v in self.numbers.items() if v}


def _by_item(results: Sequence[ResultRow]) -> dict[str, _ItemSide]:
    sides: dict[str, _ItemSide] = {}
    for result in results:  # item order, then repetition
        side = sides.setdefault(result.item_id, _ItemSide(result, {}))
        for name, value in result.scores.items():
            number = score_number(value)
            if number is not None:
                side.numbers.setdefault(name, []).append(number)
    return sides


def _page_items(
    page: Sequence[str], base: dict[str, _ItemSide], candidate: dict[str, _ItemSide]
) -> list[dict[str, Any]]:
    """The page's items, both sides whole: outputs of the first repetition, numeric scores
    averaged over the repetitions and text scores as the first gave them."""
    items = []
    for item in page:
        left, right = base[item], candidate[item]
        lm, rm = left.means(), right.means()
        items.append(
            {
                "item_id": item,
                "input_variables": left.first.input_variables,
                "expected_output": left.first.expected_output,
                "base": {"output": left.first.output, "scores": {**left.first.scores, **lm}},
                "candidate": {
                    "output": right.first.output,
                    "scores": {**right.first.scores, **rm},
                },
                "delta": {name: rm[name] - lm[name] for name in sorted(lm.keys() & rm.keys())},
            }
        )
    return items


def _triple(base: float | None, candidate: float | None) -> dict[str, float | None]:
    delta = None if base is None or candidate is None else candidate - base
    return {"base": base, "candidate": candidate, "delta": delta}
