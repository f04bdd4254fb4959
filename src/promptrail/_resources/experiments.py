"""``client.experiments``: experiments, their results and comparisons (docs/api-notes.md, "Datasets
and experiments").

Each endpoint is described once, by a function returning a :class:`~promptrail._api_call.Call`;
:class:`Experiments` and :class:`AsyncExperiments` only send them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from .._api_call import Call, Page, body_of, data_of, page_of, params, read_json, segment
from .._http import AsyncHTTP, SyncHTTP
from .._types import BatchResult, Comparison, Experiment, ExperimentResult, ExperimentSummary

# The wire models live in promptrail._types (beside the rest, compared with the collector's by
# tests/sdk/test_wire_models.py); importers that name them from here keep working.
__all__ = [
    "AsyncExperiments",
    "Comparison",
    "Experiment",
    "ExperimentResult",
    "ExperimentSummary",
    "Experiments",
]

# -- the calls ---------------------------------------------------------------------------------


def _path(experiment_id: str, *rest: str) -> str:
    return "/".join(["/v1/experiments", segment(experiment_id), *rest])


def _create(fields: Mapping[str, Any]) -> Call[Experiment]:
    return Call("POST", "/v1/experiments", data_of(Experiment), body=body_of(**fields))


def _list_page(
    dataset: str | None, prompt_name: str | None, limit: int | None
) -> Callable[[str | None], Call[Page[Experiment]]]:
    return lambda cursor: Call(
        "GET",
        "/v1/experiments",
        page_of(Experiment),
        params=params(dataset=dataset, prompt_name=prompt_name, limit=limit, cursor=cursor),
    )


def _results_page(
    experiment_id: str, limit: int | None
) -> Callable[[str | None], Call[Page[ExperimentResult]]]:
    return lambda cursor: Call(
        "GET",
        _path(experiment_id, "results"),
        page_of(ExperimentResult),
        params=params(limit=limit, cursor=cursor),
    )


def _post_results(experiment_id: str, results: Iterable[Mapping[str, Any]]) -> Call[BatchResult]:
    body = {"results": [body_of(**result) for result in results]}
    return Call("POST", _path(experiment_id, "results"), data_of(BatchResult), body=body)


def _compare(base: str, candidate: str, limit: int | None, cursor: str | None) -> Call[Comparison]:
    def parse(response: Any) -> Comparison:
        document = read_json(response)
        comparison = data_of(Comparison)(response)
        comparison.next_cursor = (document.get("pagination") or {}).get("next_cursor")
        return comparison

    query = params(base=base, candidate=candidate, limit=limit, cursor=cursor)
    return Call("GET", "/v1/experiments/compare", parse, params=query)


def _fields(
    dataset: str,
    prompt: str | None,
    name: str | None,
    version: int | None,
    label: str | None,
    model: str | None,
    parameters: Mapping[str, Any] | None,
    evaluators: Sequence[Mapping[str, Any]],
    repetitions: int | None,
    concurrency: int | None,
    metadata: Mapping[str, Any] | None,
    task: Literal["service", "client"] | None,
) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "prompt": prompt,
        "name": name,
        "version": version,
        "label": label,
        "model": model,
        "parameters": parameters,
        "evaluators": [dict(e) for e in evaluators],
        "repetitions": repetitions,
        "concurrency": concurrency,
        "metadata": metadata,
        "task": task,
    }


_FINISHED = ("completed", "cancelled", "failed")


# -- sync --------------------------------------------------------------------------------------


class Experiments:
    """Run a prompt version over a dataset on the service; read, compare and cancel."""

    def __init__(self, http: SyncHTTP) -> None:
        self._http = http

    def create(
        self,
        dataset: str,
        prompt: str | None = None,
        *,
        name: str | None = None,
        version: int | None = None,
        label: str | None = None,
        model: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        evaluators: Sequence[Mapping[str, Any]] = (),
        repetitions: int | None = None,
        concurrency: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        task: Literal["service", "client"] | None = None,
    ) -> Experiment:
        """Start ``prompt`` (its newest version, ``version`` or ``label``) over ``dataset``
        on the service; it runs in the background (:meth:`wait` for it).

        >>> exp = client.experiments.create("qa", "support-reply", label="staging",
        ...                                 evaluators=[{"type": "exact_match"}])
        >>> client.experiments.wait(exp.id).summary.scores["exact_match"].mean
        """
        fields = _fields(
            dataset, prompt, name, version, label, model, parameters, evaluators,
            repetitions, concurrency, metadata, task,
        )  # fmt: skip
        return self._http.call(_create(fields))

    def get(self, experiment_id: str) -> Experiment:
        """Return an experiment with its counts and summary."""
        return self._http.call(Call("GET", _path(experiment_id), data_of(Experiment)))

    def wait(self, experiment_id: str, *, timeout: float = 600, poll: float = 0.5) -> Experiment:
        """Return the experiment once it is no longer running (TimeoutError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            experiment = self.get(experiment_id)
            if experiment.status in _FINISHED:
                return experiment
            if time.monotonic() > deadline:
                raise TimeoutError(f"experiment {experiment_id} still running after {timeout} s")
            time.sleep(poll)

    def list(
        self,
        *,
        dataset: str | None = None,
        prompt_name: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Experiment]:
        """Iterate over experiments, newest first (``dataset``: a name or an id)."""
        return self._http.paginate(_list_page(dataset, prompt_name, limit))

    def results(
        self, experiment_id: str, *, limit: int | None = None
    ) -> Iterator[ExperimentResult]:
        """Iterate over an experiment's results in item order (then repetition)."""
        return self._http.paginate(_results_page(experiment_id, limit))

    def cancel(self, experiment_id: str) -> Experiment:
        """Stop a running experiment; the results it stored stay."""
        return self._http.call(Call("POST", _path(experiment_id, "cancel"), data_of(Experiment)))

    def compare(
        self, base: str, candidate: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Comparison:
        """Pair two experiments by item (a page of items; ``next_cursor`` for the next)."""
        return self._http.call(_compare(base, candidate, limit, cursor))

    def post_results(self, experiment_id: str, results: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Store results of an experiment run by your code (``task="client"``)."""
        return self._http.call(_post_results(experiment_id, results))

    def complete(self, experiment_id: str) -> Experiment:
        """Mark an experiment run by your code completed."""
        return self._http.call(Call("POST", _path(experiment_id, "complete"), data_of(Experiment)))


# -- async -------------------------------------------------------------------------------------


class AsyncExperiments:
    """:class:`Experiments` with ``await``."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def create(
        self,
        dataset: str,
        prompt: str | None = None,
        *,
        name: str | None = None,
        version: int | None = None,
        label: str | None = None,
        model: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        evaluators: Sequence[Mapping[str, Any]] = (),
        repetitions: int | None = None,
        concurrency: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        task: Literal["service", "client"] | None = None,
    ) -> Experiment:
        """Start ``prompt`` over ``dataset`` on the service."""
        fields = _fields(
            dataset, prompt, name, version, label, model, parameters, evaluators,
            repetitions, concurrency, metadata, task,
        )  # fmt: skip
        return await self._http.call(_create(fields))

    async def get(self, experiment_id: str) -> Experiment:
        """Return an experiment with its counts and summary."""
        return await self._http.call(Call("GET", _path(experiment_id), data_of(Experiment)))

    async def wait(
        self, experiment_id: str, *, timeout: float = 600, poll: float = 0.5
    ) -> Experiment:
        """Return the experiment once it is no longer running."""
        deadline = time.monotonic() + timeout
        while True:
            experiment = await self.get(experiment_id)
            if experiment.status in _FINISHED:
                return experiment
            if time.monotonic() > deadline:
                raise TimeoutError(f"experiment {experiment_id} still running after {timeout} s")
            await asyncio.sleep(poll)

    def list(
        self,
        *,
        dataset: str | None = None,
        prompt_name: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Experiment]:
        """Iterate over experiments, newest first."""
        return self._http.paginate(_list_page(dataset, prompt_name, limit))

    def results(
        self, experiment_id: str, *, limit: int | None = None
    ) -> AsyncIterator[ExperimentResult]:
        """Iterate over an experiment's results in item order."""
        return self._http.paginate(_results_page(experiment_id, limit))

    async def cancel(self, experiment_id: str) -> Experiment:
        """Stop a running experiment."""
        path = _path(experiment_id, "cancel")
        return await self._http.call(Call("POST", path, data_of(Experiment)))

    async def compare(
        self, base: str, candidate: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Comparison:
        """Pair two experiments by item."""
        return await self._http.call(_compare(base, candidate, limit, cursor))

    async def post_results(
        self, experiment_id: str, results: Iterable[Mapping[str, Any]]
    ) -> BatchResult:
        """Store results of an experiment run by your code."""
        return await self._http.call(_post_results(experiment_id, results))

    async def complete(self, experiment_id: str) -> Experiment:
        """Mark an experiment run by your code completed."""
        path = _path(experiment_id, "complete")
        return await self._http.call(Call("POST", path, data_of(Experiment)))
