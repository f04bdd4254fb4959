"""``promptrail.run_experiment``: an experiment run by the caller's code (docs/api-notes.md,
"Datasets and experiments").

The task runs in this process, on ``concurrency`` worker threads, once per item and
repetition, inside ``promptrail.context`` with ``experiment_id``, ``dataset_item_id`` and
``repetition`` (and, when capture is on, under an ``@observe`` span starting a trace of its
own): every provider call it makes is captured as usual, labelled with its experiment and
item, and the result names its trace (whose records' cost the collector counts as the
result's) and last record. The evaluators (built-in names, or callables) score each output here;
the results are posted in batches as they finish, so ``get``, ``results`` and ``compare``
serve the experiment while it runs and after, as they serve one run on the service.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context

from ._client import Client
from ._context import context
from ._evaluators import BUILT_IN, evaluate_simple
from ._observe import observe
from ._resources.datasets import Dataset
from ._resources.experiments import Experiment, ExperimentSummary
from ._scores import current_trace_id, last_record_id

logger = logging.getLogger("promptrail")

Evaluator = str | Mapping[str, Any] | Callable[[dict[str, Any], Any], Any]
# Results posted at once (the collector takes up to 1,000 a post).
_BATCH = 50
# The built-ins that can run here: a judge is a stored prompt run on the service.
_LOCAL = tuple(name for name in BUILT_IN if name != "llm_judge")


@dataclass
class ExperimentRun:
    """What :func:`run_experiment` returns: the stored experiment and the results it posted."""

    id: str
    experiment: Experiment
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summary(self) -> ExperimentSummary:
        """Per score the mean and its 95% interval, cost, tokens, latency (the collector's)."""
        return self.experiment.summary


@dataclass(frozen=True)
class _Scorer:
    name: str
    kind: str | None  # a built-in, or None for a callable
    function: Callable[[dict[str, Any], Any], Any] | None = None
    pattern: re.Pattern[str] | None = None

    def spec(self) -> dict[str, Any] | None:
        """The evaluator as the experiment records it (a callable is known by name only)."""
        if self.kind is None:
            return None
        spec: dict[str, Any] = {"type": self.kind, "name": self.name}
        if self.pattern is not None:
            spec["pattern"] = self.pattern.pattern
        return spec


def _scorers(evaluators: Iterable[Evaluator]) -> list[_Scorer]:
    scorers: list[_Scorer] = []
    for evaluator in evaluators:
        if callable(evaluator):
            scorers.append(_Scorer(getattr(evaluator, "__name__", "evaluator"), None, evaluator))
            continue
        spec: Mapping[str, Any] = {"type": evaluator} if isinstance(evaluator, str) else evaluator
        kind = spec.get("type")
        if kind not in _LOCAL:
            raise ValueError(
                f"unknown evaluator {kind!r}: use one of {', '.join(_LOCAL)} or a callable "
                "(item, output) -> number | bool | str (llm_judge runs on the service)"
            )
        pattern = None
        if kind == "regex":
            try:
                pattern = re.compile(spec["pattern"])
            except (KeyError, TypeError, re.error) as exc:
                raise ValueError(f"regex needs a pattern that compiles: {exc}") from None
        scorers.append(_Scorer(str(spec.get("name", kind)), str(kind), pattern=pattern))
    names = [s.name for s in scorers]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two evaluators score under the name {name!r}")
    return scorers


def _text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def _score_value(value: Any) -> bool | float | str | None:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float) and math.isfinite(float(value)):
        return value
    return None


def _call(task: Callable[[dict[str, Any]], Any], item: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(task):
        return asyncio.run(task(item))
    return task(item)


@observe(name="experiment task", kind="chain", capture_input=False, capture_output=False)
def _traced(task: Callable[[dict[str, Any]], Any], item: dict[str, Any]) -> tuple[Any, str | None]:
    # Under its own span: the task's provider calls share this trace.
    return _call(task, item), current_trace_id()


def _traced_apart(
    task: Callable[[dict[str, Any]], Any], item: dict[str, Any]
) -> tuple[Any, str | None]:
    # A trace of its own, whatever span the caller is in: the result's trace then holds this
    # run's calls alone, and the collector counts their cost as the result's.
    token = otel_context.attach(otel_context.Context())
    try:
        return _traced(task, item)
    finally:
        otel_context.detach(token)


def _run_one(
    task: Callable[[dict[str, Any]], Any],
    scorers: Sequence[_Scorer],
    experiment_id: str,
    item: dict[str, Any],
    repetition: int,
) -> dict[str, Any]:
    labels = {
        "experiment_id": experiment_id,
        "dataset_item_id": item["id"],
        "repetition": repetition,
    }
    result: dict[str, Any] = {"item_id": item["id"], "repetition": repetition}
    started = time.perf_counter()
    with context(metadata=labels):
        try:
            output, trace_id = _traced_apart(task, item)
        except Exception as exc:
            result |= {
                "status": "error",
                "error": f"{type(exc).__name__}: {exc}",
                "output": "",
                "latency_ms": (time.perf_counter() - started) * 1000,
            }
            return result
        result |= {
            "status": "success",
            "output": _text(output),
            "latency_ms": (time.perf_counter() - started) * 1000,
            "trace_id": trace_id,
            "request_id": last_record_id() if trace_id else None,
        }
    scores: dict[str, Any] = {}
    for scorer in scorers:
        try:
            if scorer.function is not None:
                value = _score_value(scorer.function(item, output))
            else:
                assert scorer.kind is not None
                value = evaluate_simple(
                    scorer.kind, result["output"], item["expected_output"], scorer.pattern
                )
        except Exception:
            logger.warning(
                "promptrail: evaluator %s failed on item %s", scorer.name, item["id"], exc_info=True
            )
            continue
        if value is not None:
            scores[scorer.name] = value
    result["scores"] = scores
    return result


class _Progress:
    """A progress bar on a terminal (rich's when installed), else nothing."""

    def __init__(self, total: int, label: str, show: bool | None) -> None:
        self._bar: Any = None
        self._done = 0
        self._total = total
        self._label = label
        self._plain = False
        if show is False or (show is None and not sys.stderr.isatty()):
            return
        try:
            from rich.progress import Progress  # optional: the collector's extra has it
        except ImportError:
            self._plain = True
            return
        self._bar = Progress(transient=False)
        self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def advance(self, errors: int) -> None:
        self._done += 1
        if self._bar is not None:
            suffix = f" ({errors} errors)" if errors else ""
            self._bar.update(self._task, advance=1, description=f"{self._label}{suffix}")
        elif self._plain:
            sys.stderr.write(f"\r{self._label}: {self._done}/{self._total}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self._plain:
            sys.stderr.write("\n")


def run_experiment(
    dataset: str | Dataset,
    task: Callable[[dict[str, Any]], Any],
    evaluators: Iterable[Evaluator] = (),
    *,
    name: str | None = None,
    repetitions: int = 1,
    concurrency: int = 4,
    metadata: Mapping[str, Any] | None = None,
    client: Client | None = None,
    progress: bool | None = None,
) -> ExperimentRun:
    """Run ``task(item)`` over a stored dataset in this process, score it, and store it.

    ``item`` is a dict with ``id``, ``input_variables``, ``expected_output`` and ``metadata``.
    ``evaluators``: built-in names (``"exact_match"``, ``"contains"``, ``"json_valid"``,
    ``"similarity"``, or ``{"type": "regex", "pattern": ...}``) or callables
    ``(item, output) -> number | bool | str`` scored under their ``__name__``. A task that
    raises makes that result an error; the others run on. ``client`` defaults to a
    :class:`promptrail.Client` from the environment; ``progress`` shows a bar (default: when
    stderr is a terminal). With ``promptrail.init()`` and ``instrument()`` on, the provider
    calls inside are captured and linked to their result.

    >>> run = promptrail.run_experiment("capitals", lambda item: ask(item["input_variables"]),
    ...                                 ["exact_match", lambda item, out: len(out) < 200])
    >>> run.summary.scores["exact_match"].mean
    """
    if not 1 <= repetitions <= 10:
        raise ValueError("repetitions must be 1 to 10")
    if not 1 <= concurrency <= 32:
        raise ValueError("concurrency must be 1 to 32")
    scorers = _scorers(evaluators)
    own = client is None
    sdk = client if client is not None else Client()
    try:
        ref = dataset.name if isinstance(dataset, Dataset) else dataset
        items = [
            {
                "id": i.id,
                "input_variables": i.input_variables,
                "expected_output": i.expected_output,
                "metadata": i.metadata,
            }
            for i in sdk.datasets.items(ref, limit=100)
        ]
        experiment = sdk.experiments.create(
            ref,
            task="client",
            name=name,
            repetitions=repetitions,
            concurrency=concurrency,
            metadata=metadata,
            evaluators=[spec for spec in (s.spec() for s in scorers) if spec is not None],
        )
        posted = _run_all(sdk, experiment, task, scorers, items, repetitions, concurrency, progress)
        _flush_captured()
        done = sdk.experiments.complete(experiment.id)
        return ExperimentRun(done.id, done, posted)
    finally:
        if own:
            sdk.close()


def _run_all(
    sdk: Client,
    experiment: Experiment,
    task: Callable[[dict[str, Any]], Any],
    scorers: Sequence[_Scorer],
    items: Sequence[dict[str, Any]],
    repetitions: int,
    concurrency: int,
    progress: bool | None,
) -> list[dict[str, Any]]:
    bar = _Progress(len(items) * repetitions, experiment.name, progress)
    posted: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    errors = 0
    try:
        with ThreadPoolExecutor(concurrency, thread_name_prefix="promptrail-experiment") as pool:
            futures: list[Future[dict[str, Any]]] = [
                # Each run in a copy of the caller's context: its promptrail.context applies.
                pool.submit(
                    contextvars.copy_context().run,
                    _run_one,
                    task,
                    scorers,
                    experiment.id,
                    item,
                    repetition,
                )
                for item in items
                for repetition in range(1, repetitions + 1)
            ]
            for future in as_completed(futures):
                result = future.result()
                errors += result["status"] == "error"
                pending.append(result)
                bar.advance(errors)
                if len(pending) >= _BATCH:
                    sdk.experiments.post_results(experiment.id, pending)
                    posted += pending
                    pending = []
        if pending:
            sdk.experiments.post_results(experiment.id, pending)
            posted += pending
    finally:
        bar.close()
    return posted


def _flush_captured() -> None:
    """Ship the task's captured records now, so the experiment's links resolve at once."""
    from ._runtime import flush

    try:
        flush()
    except Exception:  # capture never breaks the caller's code
        logger.debug("promptrail: flush after the experiment failed", exc_info=True)
