"""The SDK's wire models agree with the collector's: the same fields, types and defaults.

The collector (``collector/models/``) and the SDK (``promptrail._types``) each describe the
JSON they exchange, in classes of their own: the SDK must install without the collector, and
reads leniently (extra fields allowed, one model for a list item and the detail) where the
collector describes each answer exactly. So nothing but this test keeps them in step.

- What the collector answers, the SDK reads: the same field names (a field the collector adds
  must be declared by the SDK too, and the SDK declares none it never gets); every kind of
  value the collector may send, the SDK's type takes; where the collector's model has a
  default, the SDK's is the same.
- What a client logs (``RequestLog``, the keywords of ``client.requests.log``), the collector
  takes (``RequestRecordIn``): the same field names, and every kind of value the SDK lets a
  caller pass, the collector's type takes.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import (
    Annotated,
    Any,
    Literal,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from promptrail import _types as sdk
from promptrail._prompt_diff import PromptChange, PromptDiff
from promptrail.collector.models import (
    datasets,
    experiments,
    prompts,
    requests,
    runs,
    scores,
    traces,
)

# (the models of what the collector answers, the SDK model that reads all of them)
ANSWERS: list[tuple[tuple[type[BaseModel], ...], type[BaseModel]]] = [
    ((requests.RequestDetail, requests.RequestListItem), sdk.RequestRecord),
    ((requests.UsageDetailOut, requests.UsageOut), sdk.Usage),
    ((requests.TimingOut,), sdk.Timing),
    ((requests.IntegrationOut,), sdk.Integration),
    ((requests.BatchResult,), sdk.BatchResult),
    ((requests.RejectedRecord,), sdk.RejectedRecord),
    ((requests.SearchHit,), sdk.SearchHit),
    ((requests.HighlightRun,), sdk.HighlightRun),
    ((requests.ExportOut,), sdk.Export),
    ((requests.DeleteResult,), sdk.RequestsDeleted),
    ((requests.AnalyticsResult,), sdk.AnalyticsResult),
    ((requests.AnalyticsGroup,), sdk.AnalyticsGroup),
    ((requests.Period,), sdk.AnalyticsPeriod),
    ((requests.EnvironmentOut,), sdk.Environment),
    ((requests.EvaluationOut,), sdk.Evaluation),
    (
        (prompts.PromptOut, prompts.PromptGetOut, prompts.PromptListItem, prompts.PromptUpdateOut),
        sdk.Prompt,
    ),
    ((prompts.PromptDeleted,), sdk.PromptDeleted),
    ((prompts.VersionDetailOut, prompts.VersionOut), sdk.PromptVersion),
    ((prompts.RollbackOut,), sdk.Rollback),
    ((prompts.LabelOut,), sdk.Label),
    ((prompts.LabelRemoved,), sdk.LabelRemoved),
    ((prompts.DiffOut,), PromptDiff),
    ((prompts.ChangeOut,), PromptChange),
    ((prompts.TemplateOut,), sdk.TemplatePayload),
    ((prompts.VariableSpec,), sdk.TemplateVariable),
    ((runs.RunResult,), sdk.RunResult),
    ((runs.RunUsage,), sdk.Usage),
    ((scores.ScoreOut,), sdk.Score),
    ((scores.ScoreConfigOut,), sdk.ScoreConfig),
    ((scores.FeedbackTokenOut,), sdk.FeedbackToken),
    ((traces.TraceDetail, traces.TraceListItem), sdk.Trace),
    ((traces.SessionDetail, traces.SessionListItem), sdk.Session),
    ((traces.UserListItem,), sdk.User),
    ((datasets.DatasetOut,), sdk.Dataset),
    ((datasets.ItemOut,), sdk.DatasetItem),
    ((datasets.AcceptedOut,), sdk.ItemsAccepted),
    ((experiments.ExperimentOut,), sdk.Experiment),
    ((experiments.Counts,), sdk.ExperimentCounts),
    ((experiments.Summary,), sdk.ExperimentSummary),
    ((experiments.ScoreSummary,), sdk.ScoreSummary),
    ((experiments.ResultOut,), sdk.ExperimentResult),
    ((experiments.CompareOut,), sdk.Comparison),
]

# Fields an SDK model holds that are not in the collector's model, and where they come from.
SDK_ONLY: dict[type[BaseModel], set[str]] = {
    sdk.Comparison: {"next_cursor"},  # the answer's pagination, beside its data
}
# Fields of a collector's answer the SDK does not read yet, and why (none: a chat prompt's
# template payload, its content null, is read whole by the SDK's chat templates).
NOT_YET_READ: dict[type[BaseModel], set[str]] = {}

# A receiving kind also takes these: JSON numbers take integers; a datetime field takes its
# ISO 8601 text.
WIDER = {"number": {"integer"}, "date-time": {"string"}}

Fields = dict[str, tuple[Any, FieldInfo | None]]  # name -> (type, pydantic field if a model)


def kinds(annotation: Any) -> set[str]:
    """Return the kinds of JSON value a type stands for (``date-time``: ISO 8601 text)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return kinds(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(kinds(arm) for arm in get_args(annotation)))
    if origin is Literal:
        return set().union(*(kinds(type(value)) for value in get_args(annotation)))
    if annotation is Any:
        return {"any"}
    if annotation is type(None):
        return {"null"}
    cls = origin or annotation
    if is_typeddict(cls):
        return {"object"}
    for kind, classes in KINDS:
        if isinstance(cls, type) and issubclass(cls, classes):
            return {kind}
    raise TypeError(f"no JSON kind for {annotation!r}")


# In order: bool before int, str before Sequence.
KINDS: list[tuple[str, type | tuple[type, ...]]] = [
    ("boolean", bool),
    ("integer", int),
    ("number", float),
    ("string", str),
    ("date-time", datetime),
    ("object", (Mapping, BaseModel)),
    ("array", Sequence),
]


def untaken(receiver: Any, sent: Any) -> set[str]:
    """Return the kinds of value the sender's type allows that the receiver's refuses."""
    takes = kinds(receiver)
    if "any" in takes:
        return set()
    takes |= set().union(*(WIDER.get(kind, set()) for kind in takes))
    return kinds(sent) - takes


def model_fields(*models: type[BaseModel]) -> Fields:
    """Return the fields of the models (a name in several keeps the first one's)."""
    fields: Fields = {}
    for model in reversed(models):
        fields.update({name: (f.annotation, f) for name, f in model.model_fields.items()})
    return fields


def name_differences(collector: Fields, client: Fields) -> list[str]:
    """Return the fields only one side declares."""
    return [f"{name}: only the collector has it" for name in sorted(collector.keys() - client)] + [
        f"{name}: only the SDK has it" for name in sorted(client.keys() - collector)
    ]


def default_of(field: FieldInfo) -> Any:
    return field.get_default(call_default_factory=True)


def answer_differences(sent: tuple[type[BaseModel], ...], read: type[BaseModel]) -> list[str]:
    """Return every way ``read`` (the SDK's) disagrees with what the collector sends."""
    collector, client = model_fields(*sent), model_fields(read)
    for name in SDK_ONLY.get(read, set()):
        client.pop(name)
    for name in NOT_YET_READ.get(read, set()):
        collector.pop(name)
        client.pop(name, None)
    found = name_differences(collector, client)
    for name in sorted(collector.keys() & client.keys()):
        (sent_type, sent_field), (read_type, read_field) = collector[name], client[name]
        if refused := untaken(read_type, sent_type):
            found.append(f"{name}: the SDK's {read_type} refuses {sorted(refused)}")
        assert sent_field is not None and read_field is not None
        if not sent_field.is_required() and (
            read_field.is_required() or default_of(read_field) != default_of(sent_field)
        ):
            found.append(
                f"{name}: default {default_of(sent_field)!r} in the collector, "
                f"{'none' if read_field.is_required() else repr(default_of(read_field))} in the SDK"
            )
    return found


@pytest.mark.parametrize(
    ("sent", "read"),
    ANSWERS,
    ids=[read.__name__ + "-" + sent[0].__name__ for sent, read in ANSWERS],
)
def test_the_sdk_reads_every_field_of_the_collectors_answers(
    sent: tuple[type[BaseModel], ...], read: type[BaseModel]
) -> None:
    assert answer_differences(sent, read) == []


def test_the_collector_takes_every_field_the_sdk_logs() -> None:
    client: Fields = {
        name: (annotation, None)
        for name, annotation in get_type_hints(sdk.RequestLog, include_extras=True).items()
    }
    collector = model_fields(requests.RequestRecordIn)

    found = name_differences(collector, client)
    for name in sorted(collector.keys() & client.keys()):
        if refused := untaken(collector[name][0], client[name][0]):
            found.append(f"{name}: the collector's {collector[name][0]} refuses {sorted(refused)}")

    assert found == []


def test_every_answer_model_the_sdk_exports_is_compared() -> None:
    compared = {read for _, read in ANSWERS}
    # Private names are bases (_Shape, _TemplateFields), compared through their exported models.
    readers = {
        model
        for name, model in vars(sdk).items()
        if isinstance(model, type) and issubclass(model, sdk._Shape) and not name.startswith("_")
    }

    assert readers - compared == set()


# What the collector's routes answer that no SDK model above reads, and why.
NOT_READ_AS_MODELS: dict[type[BaseModel], str] = {
    experiments.Percentiles: "the SDK reads an experiment's latency as a dict (p50, p95)",
    experiments.CompareScore: "Comparison.scores holds each as a dict",
    experiments.Triple: "Comparison's cost and latency are dicts (base, candidate, delta)",
    experiments.CompareItem: "Comparison.items holds each as a dict",
    experiments.Side: "inside a comparison item's dict",
}
# Routes no SDK client calls: the operator's, the health probe, and (docs/sdk.md, "What the
# SDK does not cover") the console's and administrators' resources: people and sign-in,
# projects and members, keys, protected labels, provider connections, the playground,
# evaluators and evaluation rules, the audit log.
NO_SDK_CLIENT = (
    "/admin/",
    "/health",
    "/auth/",
    "/users/accounts",
    "/projects",
    "/keys",
    "/connections",
    "/playground/",
    "/evaluators",
    "/evaluation-rules",
    "/audit",
)


def models_in(annotation: Any, found: set[type[BaseModel]]) -> set[type[BaseModel]]:
    """Add to ``found`` every model ``annotation`` names, and the models of their fields."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in found:
            found.add(annotation)
            for field in annotation.model_fields.values():
                models_in(field.annotation, found)
        return found
    for arm in get_args(annotation):
        models_in(arm, found)
    return found


def answered_models() -> dict[type[BaseModel], str]:
    """Every model in the data of a route's answer (envelopes and pagination left out), and
    one route that answers with it: the routes of every module of the collector's routes."""
    from fastapi.routing import APIRoute

    from promptrail.collector.api import routes

    answered: dict[type[BaseModel], str] = {}
    for module in pkgutil.iter_modules(routes.__path__):
        router = importlib.import_module(f"{routes.__name__}.{module.name}").router
        for route in router.routes:
            if not isinstance(route, APIRoute) or route.response_model is None:
                continue
            if any(part in route.path for part in NO_SDK_CLIENT):
                continue
            answer, fields = route.response_model, route.response_model.model_fields
            # Most answers wrap their data ({"data": ...}); a template is its own answer.
            data = fields["data"].annotation if "data" in fields else answer
            for model in models_in(data, set()):
                answered.setdefault(model, f"{sorted(route.methods)[0]} {route.path}")
    return answered


def test_every_model_the_collectors_routes_answer_with_is_compared() -> None:
    # A route or a field the collector adds with a model of its own, which the SDK does not
    # read yet, fails here rather than going unnoticed (datasets and experiments once did).
    compared = {model for sent, _ in ANSWERS for model in sent}

    unread = {
        f"{model.__module__}.{model.__qualname__} ({route})"
        for model, route in answered_models().items()
        if model not in compared and model not in NOT_READ_AS_MODELS
    }

    assert unread == set()


def test_a_field_the_collector_adds_to_a_dataset_or_an_experiment_is_caught() -> None:
    class DatasetWithTags(datasets.DatasetOut):
        tags: list[str]

    class ResultWithCost(experiments.ResultOut):
        estimated_cost_usd: str  # type: ignore[assignment]  # the drift under test

    assert answer_differences((DatasetWithTags,), sdk.Dataset) == [
        "tags: only the collector has it"
    ]
    assert answer_differences((ResultWithCost,), sdk.ExperimentResult) == [
        "estimated_cost_usd: the SDK's <class 'float'> refuses ['string']"
    ]


def test_the_sdk_loads_without_the_collector() -> None:
    # Why the models are defined twice: the SDK installs without the collector's extra.
    loaded = subprocess.run(
        # The client and the answers' models are loaded on first use (promptrail/__init__.py).
        [
            sys.executable,
            "-c",
            "import sys, promptrail; promptrail.Client; print(sorted(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert "promptrail._types" in loaded
    assert "promptrail.collector" not in loaded
    assert "fastapi" not in loaded
