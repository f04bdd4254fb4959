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

# -- capture (begin)
from ._context import Context, context
from ._experiments import ExperimentRun, run_experiment
from ._observe import observe
from ._runtime import flush, init, shutdown, stats
from ._scores import current_trace_id, feedback_token, last_request_id, score
from ._version import __version__
from .integrations import instrument, uninstrument

# -- capture (end)

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

# -- REST client (begin)
from ._client import AsyncClient, Client
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
    ValidationError,
)
from ._resources.datasets import Dataset, DatasetItem
from ._resources.experiments import Comparison, Experiment, ExperimentResult
from ._streaming import AsyncRunStream, RunStream
from ._templates import PromptTemplate
from ._types import (
    AnalyticsResult,
    BatchResult,
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
    "PromptDeleted",
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
    "TemplatePayload",
    "Trace",
    "Usage",
    "User",
    "ValidationError",
]
# -- REST client (end)
