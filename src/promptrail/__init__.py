"""promptrail: a prompt registry and LLM request log for Python teams.

import promptrail

promptrail.init()            # PROMPTRAIL_API_KEY / PROMPTRAIL_BASE_URL
promptrail.instrument()      # capture every openai / anthropic call

with promptrail.context(user_id="u1", session_id="s9"):
    ...                      # every record captured here carries both

@promptrail.observe(prompt_name="support-reply")
def answer(question: str) -> str: ...

promptrail.score("helpful", True, request_id=promptrail.last_request_id())
token = promptrail.feedback_token("thumbs", request_id=...)   # for the end user's browser
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from ._client import AsyncClient, Client
    from ._context import Context, context
    from ._errors import (
        APIConnectionError,
        APITimeoutError,
        AuthenticationError,
        ConflictError,
        MissingVariablesError,
        NotFoundError,
        PayloadTooLargeError,
        PromptrailError,
        ProviderError,
        TemplateError,
        ValidationError,
    )
    from ._experiments import ExperimentRun, run_experiment
    from ._observe import observe
    from ._prompt_diff import PromptChange, PromptDiff
    from ._resources.datasets import Dataset, DatasetItem
    from ._resources.experiments import Comparison, Experiment, ExperimentResult
    from ._runtime import flush, init, shutdown, stats
    from ._scores import current_trace_id, feedback_token, last_request_id, score
    from ._streaming import AsyncRunStream, RunStream
    from ._templates import PromptTemplate
    from ._types import (
        AnalyticsResult,
        BatchResult,
        Environment,
        Evaluation,
        Export,
        FeedbackToken,
        Label,
        LabelRemoved,
        Prompt,
        PromptDeleted,
        PromptVersion,
        RequestLog,
        RequestRecord,
        RequestsDeleted,
        Rollback,
        RunResult,
        Score,
        ScoreConfig,
        SearchHit,
        Session,
        TemplatePayload,
        Trace,
        Usage,
        User,
    )
    from .integrations import instrument, uninstrument

__all__ = [
    "Context",
    "ExperimentRun",
    "__version__",
    "context",
    "current_trace_id",
    "feedback_token",
    "flush",
    "init",
    "instrument",
    "last_request_id",
    "observe",
    "run_experiment",
    "score",
    "shutdown",
    "stats",
    "uninstrument",
]
__all__ += [
    "APIConnectionError",
    "APITimeoutError",
    "AnalyticsResult",
    "AsyncClient",
    "AsyncRunStream",
    "AuthenticationError",
    "BatchResult",
    "Client",
    "Comparison",
    "ConflictError",
    "Dataset",
    "DatasetItem",
    "Environment",
    "Evaluation",
    "Experiment",
    "ExperimentResult",
    "Export",
    "FeedbackToken",
    "Label",
    "LabelRemoved",
    "MissingVariablesError",
    "NotFoundError",
    "PayloadTooLargeError",
    "Prompt",
    "PromptChange",
    "PromptDeleted",
    "PromptDiff",
    "PromptTemplate",
    "PromptVersion",
    "PromptrailError",
    "ProviderError",
    "RequestLog",
    "RequestRecord",
    "RequestsDeleted",
    "Rollback",
    "RunResult",
    "RunStream",
    "Score",
    "ScoreConfig",
    "SearchHit",
    "Session",
    "TemplateError",
    "TemplatePayload",
    "Trace",
    "Usage",
    "User",
    "ValidationError",
]

# Each module and the public names it gives, imported on first use (PEP 562): importing every
# part at once cost ~0.37 s (the REST client's httpx and pydantic models, the shipper's
# OpenTelemetry SDK), paid by every ``promptrail`` command and collector process, which need
# none of it, and by an application that only captures.
_LAZY = {
    "._context": "Context context",
    "._experiments": "ExperimentRun run_experiment",
    "._observe": "observe",
    "._prompt_diff": "PromptChange PromptDiff",
    "._runtime": "flush init shutdown stats",
    "._scores": "current_trace_id feedback_token last_request_id score",
    ".integrations": "instrument uninstrument",
    "._client": "AsyncClient Client",
    "._errors": (
        "APIConnectionError APITimeoutError AuthenticationError ConflictError "
        "MissingVariablesError NotFoundError PayloadTooLargeError PromptrailError "
        "ProviderError TemplateError ValidationError"
    ),
    "._resources.datasets": "Dataset DatasetItem",
    "._resources.experiments": "Comparison Experiment ExperimentResult",
    "._streaming": "AsyncRunStream RunStream",
    "._templates": "PromptTemplate",
    "._types": (
        "AnalyticsResult BatchResult Environment Evaluation Export FeedbackToken Label "
        "LabelRemoved Prompt "
        "PromptDeleted PromptVersion RequestLog RequestRecord RequestsDeleted Rollback "
        "RunResult Score ScoreConfig SearchHit Session TemplatePayload Trace Usage User"
    ),
}
_ORIGIN = {name: module for module, names in _LAZY.items() for name in names.split()}


def __getattr__(name: str) -> Any:
    module = _ORIGIN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
