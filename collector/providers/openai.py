"""OpenAI chat completions, and any server that speaks them (vLLM, Ollama, llama.cpp...).

``OPENAI_BASE_URL`` includes the version path, as in the OpenAI SDK
(``https://api.openai.com/v1``); requests go to ``<base>/chat/completions``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from . import (
    Completion,
    CompletionRequest,
    HttpPolicy,
    ProviderEndpoint,
    ProviderFailure,
    StreamEnd,
    StreamEvent,
    TextDelta,
    TokenUsage,
    ToolCall,
    wire_message,
)
from ._http import (
    as_int,
    error_message,
    finish_reading,
    new_client,
    open_response,
    parse_json_data,
    read_json,
    sse_events,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_PATH = "chat/completions"
# The run decides these; a version's parameters cannot override them.
_RESERVED = ("model", "messages", "stream", "stream_options")


class OpenAIProvider:
    """The chat-completions wire format over one pooled HTTP client."""

    name = "openai"

    def __init__(self, endpoint: ProviderEndpoint, policy: HttpPolicy) -> None:
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._client = new_client(endpoint, headers, policy)
        self._policy = policy

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()

    async def complete(self, request: CompletionRequest) -> Completion:
        """Return the whole answer."""
        body = _body(request, stream=False)
        async with open_response(self._client, self.name, _PATH, body, self._policy) as response:
            payload = await read_json(self.name, response)
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ProviderFailure(self.name, "answer has no choices")
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        return Completion(
            content=content if isinstance(content, str) else "",
            finish_reason=choices[0].get("finish_reason"),
            usage=_usage(payload.get("usage")),
            tool_calls=tuple(_tool_call(n, c) for n, c in enumerate(calls or []) if c),
        )

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamEvent, None]:
        """Yield the content deltas as they arrive, then the finish reason and usage."""
        body = _body(request, stream=True)
        finish_reason: str | None = None
        usage = TokenUsage()
        calls = _CallPieces()
        done = False
        async with (
            open_response(self._client, self.name, _PATH, body, self._policy) as response,
            aclosing(sse_events(self.name, response)) as events,
        ):
            async for batch in events:
                # The text of one read's events goes on together, each event its piece.
                texts: list[str] = []
                failure: ProviderFailure | None = None
                for event in batch:
                    if event.data.strip() == "[DONE]":
                        done = True
                        break
                    chunk = parse_json_data(self.name, event)
                    if "error" in chunk:
                        failure = ProviderFailure(self.name, error_message(event.data))
                        break
                    for text, reason in _deltas(chunk, calls):
                        if text:
                            texts.append(text)
                        finish_reason = reason or finish_reason
                    if isinstance(chunk.get("usage"), dict):
                        usage = _usage(chunk["usage"])
                if texts:
                    yield TextDelta(tuple(texts))
                if failure is not None:
                    raise failure
                if done:
                    break
            if not done and finish_reason is None:
                raise ProviderFailure(self.name, "stream ended before the answer was complete")
            yield StreamEnd(finish_reason, usage, calls.finished())
            if done:
                await finish_reading(events)


class _CallPieces:
    """The tool calls of a stream, put together from their deltas (keyed by ``index``: the
    first delta of a call has its id and name, the next ones pieces of its arguments)."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def take(self, deltas: Any) -> None:
        """Absorb a chunk's ``delta.tool_calls``."""
        for at, delta in enumerate(deltas if isinstance(deltas, list) else []):
            if not isinstance(delta, dict):
                continue
            index = delta.get("index", at)
            call = self._calls.setdefault(index if isinstance(index, int) else at, {})
            function = delta.get("function") or {}
            if isinstance(delta.get("id"), str):
                call["id"] = delta["id"]
            if isinstance(function, dict):
                if isinstance(function.get("name"), str):
                    call["name"] = call.get("name", "") + function["name"]
                if isinstance(function.get("arguments"), str):
                    call["arguments"] = call.get("arguments", "") + function["arguments"]

    def finished(self) -> tuple[ToolCall, ...]:
        """The calls, in the order of their indexes."""
        return tuple(
            ToolCall(str(c.get("id", "")), str(c.get("name", "")), str(c.get("arguments", "")))
            for _, c in sorted(self._calls.items())
        )


def _tool_call(number: int, call: Any) -> ToolCall:
    function = call.get("function") if isinstance(call, dict) else None
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    return ToolCall(
        str(call.get("id") or f"call_{number}") if isinstance(call, dict) else f"call_{number}",
        str(function.get("name") or ""),
        arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
    )


def _body(request: CompletionRequest, stream: bool) -> dict[str, Any]:
    body = {k: v for k, v in request.parameters.items() if k not in _RESERVED}
    body["model"] = request.model
    body["messages"] = [wire_message(m) for m in request.messages]
    for name in ("tools", "tool_choice", "response_format"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    if stream:
        body["stream"] = True
        # Without it OpenAI sends no usage in a stream; with it, a last chunk carries it.
        body["stream_options"] = {"include_usage": True}
    return body


def _deltas(chunk: dict[str, Any], calls: _CallPieces) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta") or {}
        text = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(delta, dict):
            calls.take(delta.get("tool_calls"))
        reason = choice.get("finish_reason")
        out.append((text if isinstance(text, str) else "", reason if reason else None))
    return out


def _usage(value: Any) -> TokenUsage:
    if not isinstance(value, dict):
        return TokenUsage()
    # OpenAI counts the cached and reasoning tokens inside prompt and completion tokens.
    prompt_details = value.get("prompt_tokens_details")
    completion_details = value.get("completion_tokens_details")
    return TokenUsage(
        prompt_tokens=as_int(value.get("prompt_tokens")),
        completion_tokens=as_int(value.get("completion_tokens")),
        cached_tokens=as_int(prompt_details.get("cached_tokens"))
        if isinstance(prompt_details, dict)
        else 0,
        reasoning_tokens=as_int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0,
    )
