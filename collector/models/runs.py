"""Run request and result shapes (spec 2.4, 4.3, 6)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .requests import Metadata

UserInput = Annotated[str, Field(max_length=1024 * 1024)]


class RunRequest(BaseModel):
    """``POST /v1/prompts/{id}/run`` (and the version and label forms); every field optional."""

    model_config = ConfigDict(extra="forbid")

    user_input: UserInput | None = Field(
        default=None,
        description="Fills {user_input} when the template uses it; otherwise sent as a user "
        "message after the rendered template (which then becomes the system message). For a "
        "chat prompt: appended as a last user message.",
    )
    variables: dict[str, Any] | None = Field(default=None, description="Template variable values.")
    input_variables: dict[str, Any] | None = Field(
        default=None, description="Another name for variables (both are accepted and merged)."
    )
    placeholders: dict[str, list[dict[str, Any]]] | None = Field(
        default=None,
        description="A chat prompt's placeholders filled: name -> the messages it stands for "
        "(a conversation's history; an empty list fills one too).",
    )
    metadata: Metadata = Field(
        default_factory=dict, description="Echoed in the result and stored on the record."
    )
    stream: bool = Field(default=False, description="Answer with server-sent events.")


class RunUsage(BaseModel):
    """Tokens and estimated cost of a run."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    estimated_cost_usd: float
    # As the record's detail shows them (counted inside prompt and completion tokens).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class RunResult(BaseModel):
    """Spec 2.4: the result of a run."""

    id: str = Field(description="The request record's id, req_<id>.")
    output: str
    prompt_name: str
    version: int
    model: str
    metadata: dict[str, Any]
    usage: RunUsage
    cost_known: bool = Field(
        description="False when the model has no known price (estimated_cost_usd is then 0)."
    )
    latency_ms: int
    created_at: datetime
    finish_reason: str | None = Field(
        default=None,
        description="A chat prompt's run: why the model stopped (stop, length or tool_calls).",
    )
    tool_calls: list[dict[str, str]] | None = Field(
        default=None,
        description="A chat prompt's run: the tools the model called, if any, each "
        '{"id" (the provider\'s), "name", "arguments" (JSON text)}.',
    )
