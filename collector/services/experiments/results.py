"""What an experiment writes: its results (with their runs' records and their verdicts as
scores) and its end.

Each result is stored whole, in one insert, with every evaluator's verdict; each verdict is
also a score (source ``eval``) on the result's record, written through the score service like
any other score (its rules, such as a score name's config, apply alike).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ...models.scores import ScoreIn
from ...store.experiments import ExperimentRow, ExperimentStore, ResultRow
from ...store.request_rows import RequestRow
from ..refused_writes import raise_if_refused
from ..runs import RunService
from ..scores import MAX_BATCH_SCORES, ScoreService

logger = logging.getLogger("promptrail.experiments")


def now_ms() -> datetime:
    """Now, in UTC to the millisecond (as the store keeps times)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def eval_score_id(experiment_id: str, request_id: str, name: str) -> str:
    """The id of an evaluator's score on a record: the same verdict again replaces it."""
    digest = hashlib.sha256(f"{experiment_id}|{request_id}|{name}".encode()).hexdigest()
    return f"eval_{digest[:32]}"


def eval_scores(
    experiment_id: str, results: Sequence[ResultRow], evaluators: Sequence[Any] = ()
) -> list[ScoreIn]:
    """Every verdict of these results as a score on its result's record (results without a
    record have none); a verdict of a named evaluator says which version gave it."""
    created = now_ms()
    named = {
        e["name"]: {"evaluator": e["evaluator"], "evaluator_version": e["evaluator_version"]}
        for e in evaluators
        if isinstance(e, dict) and "evaluator" in e
    }
    return [
        ScoreIn(
            id=eval_score_id(experiment_id, result.request_id, name),
            request_id=result.request_id,
            name=name,
            value=value,
            source="eval",
            metadata={
                "experiment_id": experiment_id,
                "dataset_item_id": result.item_id,
                **named.get(name, {}),
            },
            created_at=created,
        )
        for result in results
        if result.request_id
        for name, value in result.scores.items()
    ]


class ResultWriter:
    """Store an experiment, its results and its end.

    Each write the store refuses (an outage) raises its 503 ``STORE_UNAVAILABLE`` with
    ``Retry-After: retry_after_seconds``, and stops there: what follows it is not written.
    """

    def __init__(
        self,
        store: ExperimentStore,
        runs: RunService,
        scores: ScoreService,
        retry_after_seconds: int = 2,
    ) -> None:
        self._store = store
        self._runs = runs
        self._scores = scores
        self._retry_after = retry_after_seconds

    def put(self, project: str, experiment: ExperimentRow) -> None:
        """Store an experiment (a new version of its id: created, cancelled, ended)."""
        raise_if_refused(self._store.put(project, experiment), self._retry_after, "experiments")

    def save(
        self,
        project: str,
        experiment: ExperimentRow,
        results: Sequence[ResultRow],
        records: Sequence[RequestRow] = (),
    ) -> None:
        """Store the runs' records, then the results, then each verdict as a score on its
        record: a result anyone can read has its record stored."""
        self._runs.store_records(project, records)
        raise_if_refused(
            self._store.put_results(project, experiment.id, results),
            self._retry_after,
            "experiment results",
        )
        verdicts = eval_scores(experiment.id, results, experiment.spec.get("evaluators", ()))
        for start in range(0, len(verdicts), MAX_BATCH_SCORES):
            _, rejected = self._scores.batch(project, verdicts[start : start + MAX_BATCH_SCORES])
            for _, error in rejected:
                # The verdict stays in its result; only the score on the record is refused.
                logger.warning(
                    "experiment %s: a verdict was not stored as a score: %s",
                    experiment.id,
                    error.get("message"),
                )

    def finish(
        self, project: str, experiment: ExperimentRow, status: str, reason: str | None
    ) -> ExperimentRow:
        """Mark a running experiment ``status`` (with ``reason``); one no longer running
        (cancelled or completed meanwhile) stays as it is."""
        current = self._store.get(project, experiment.id) or experiment
        if current.status != "running":
            return current
        spec = {**current.spec, **({"error": reason} if reason else {})}
        done = replace(current, status=status, spec=spec, completed_at=now_ms())
        self.put(project, done)
        return done
