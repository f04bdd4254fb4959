"""The pieces of a run that more than one caller uses: how a text template becomes messages,
and what a finished call leaves (its outcome, its record's output and usage, its error body).

:mod:`.runs` runs stored versions with them; the playground (:mod:`.playground`) runs its cells
with the same pieces, through :meth:`.runs.RunService.relay`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UpstreamProviderFailed
from ..models.runs import RunUsage
from ..providers import ChatMessage, ProviderFailure, TokenUsage, ToolCall
from ..store.request_rows import RequestRow
from .templates import render_template, template_variables

if TYPE_CHECKING:
    from .runs import PreparedRun

USER_INPUT = "user_input"


@dataclass(frozen=True)
class Relayed:
    """How a relayed stream ended (:meth:`RunService.relay`): its record (None when it could
    not be made) and, when the run failed, the contract's error body."""

    row: RequestRow | None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    """What the provider call produced (a failure keeps the text relayed before it)."""

    content: str
    finish_reason: str | None
    usage: TokenUsage
    llm_call_ms: int
    time_to_first_token_ms: int | None = None
    error: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def build_messages(
    template: str, variables: Mapping[str, Any], user_input: str | None
) -> tuple[ChatMessage, ...]:
    """Render the template and place ``user_input`` as docs/api-notes.md, "Runs" says.

    >>> build_messages("Be brief.", {}, "Hi")
    (ChatMessage(role='system', content='Be brief.'), ChatMessage(role='user', content='Hi'))
    """
    fills_template = USER_INPUT in template_variables(template)
    values = {name: variable_text(value) for name, value in variables.items()}
    if fills_template and user_input is not None:
        values[USER_INPUT] = user_input
    rendered = render_template(template, values)
    if user_input is not None and not fills_template:
        return ChatMessage("system", rendered), ChatMessage("user", user_input)
    return (ChatMessage("user", rendered),)


def variable_text(value: Any) -> str:
    """Return the text a variable renders as: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def output_of(outcome: Outcome) -> dict[str, Any]:
    """A record's output: the text and finish reason, and the tool calls when there are."""
    output: dict[str, Any] = {"content": outcome.content, "finish_reason": outcome.finish_reason}
    if outcome.tool_calls:
        output["tool_calls"] = [call.as_dict() for call in outcome.tool_calls]
    return output


def usage_of(row: RequestRow) -> RunUsage:
    return RunUsage(
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        total_tokens=row.total_tokens,
        estimated_cost_usd=row.estimated_cost_usd,
        cached_tokens=row.cached_tokens,
        cache_write_tokens=row.cache_write_tokens,
        reasoning_tokens=row.reasoning_tokens,
    )


def reason(exc: BaseException) -> str:
    """Return the error text a failed run's record keeps."""
    if isinstance(exc, ProviderFailure):
        return exc.message
    if isinstance(exc, Exception):
        return f"internal error: {type(exc).__name__}"
    return "client disconnected before the end of the run"


def provider_error(run: PreparedRun, exc: ProviderFailure) -> UpstreamProviderFailed:
    return UpstreamProviderFailed(
        exc.message,
        {"request_id": run.request_id, "provider": exc.provider, "provider_status": exc.status},
    )


def internal_error(run: PreparedRun) -> dict[str, Any]:
    return {
        "type": "api_error",
        "message": "Internal error; see the collector log",
        "code": "INTERNAL_ERROR",
        "details": {"request_id": run.request_id},
    }
