"""Anthropic's Messages API.

``ANTHROPIC_BASE_URL`` is the host without the version path, as in the Anthropic SDK
(``https://api.anthropic.com``); requests go to ``<base>/v1/messages``. System messages travel
in the top-level ``system`` field, and ``max_tokens`` is required (1024 when the version's
parameters do not set it).
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
from ._anthropic_chat import answer_tool, chat_body, finish_reason
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

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
_PATH = "v1/messages"
_RESERVED = ("model", "messages", "system", "stream")


class AnthropicProvider:
    """The Messages wire format over one pooled HTTP client."""

    name = "anthropic"

    def __init__(self, endpoint: ProviderEndpoint, policy: HttpPolicy) -> None:
        headers = {"anthropic-version": API_VERSION}
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
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
        blocks = payload.get("content")
        if not isinstance(blocks, list):
            raise ProviderFailure(self.name, "answer has no content")
        text = "".join(
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        usage = payload.get("usage")
        state = _StreamState(answer_tool(request))
        state.count(usage)
        stop_reason = payload.get("stop_reason")
        if not request.chat:
            return Completion(content=text, finish_reason=stop_reason, usage=state.usage())
        calls: list[ToolCall] = []
        answered = False
        for block in blocks:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            if block.get("name") == state.answer_tool:
                text, answered = text + arguments, True
            else:
                calls.append(
                    ToolCall(str(block.get("id", "")), str(block.get("name", "")), arguments)
                )
        return Completion(
            content=text,
            finish_reason=finish_reason(stop_reason, answered),
            usage=state.usage(),
            tool_calls=tuple(calls),
        )

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamEvent, None]:
        """Yield the text deltas as they arrive, then the stop reason and usage."""
        body = _body(request, stream=True)
        state = _StreamState(answer_tool(request))
        async with (
            open_response(self._client, self.name, _PATH, body, self._policy) as response,
            aclosing(sse_events(self.name, response)) as events,
        ):
            async for batch in events:
                # The text of one read's events goes on together, each event its piece.
                texts: list[str] = []
                failure: ProviderFailure | None = None
                for event in batch:
                    try:
                        text = state.take(self.name, parse_json_data(self.name, event))
                    except ProviderFailure as exc:
                        failure = exc
                        break
                    if text:
                        texts.append(text)
                    if state.stopped:
                        break
                if texts:
                    yield TextDelta(tuple(texts))
                if failure is not None:
                    raise failure
                if state.stopped:
                    break
            if not state.stopped:
                raise ProviderFailure(self.name, "stream ended before message_stop")
            if not request.chat:
                yield StreamEnd(state.stop_reason, state.usage())
            else:
                yield StreamEnd(
                    finish_reason(state.stop_reason, state.answered),
                    state.usage(),
                    state.tool_calls(),
                )
            await finish_reading(events)


class _StreamState:
    """What the events of one Messages stream have said so far."""

    def __init__(self, answer_tool: str | None = None) -> None:
        # The tool standing for a JSON-schema answer: its input is relayed as the answer text.
        self.answer_tool = answer_tool
        self.answered = False
        self._calls: dict[int, dict[str, str]] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        self.cache_write_tokens = 0
        self.reasoning_tokens = 0
        self.stop_reason: str | None = None
        self.stopped = False

    def take(self, provider: str, payload: dict[str, Any]) -> str:
        """Absorb one event; return its text, if it carries any."""
        kind = payload.get("type")
        if kind == "content_block_delta":
            delta = payload.get("delta") or {}
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                text = delta.get("text")
                return text if isinstance(text, str) else ""
            if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                return self._input_piece(payload.get("index"), delta.get("partial_json"))
        elif kind == "content_block_start":
            block = payload.get("content_block") or {}
            if isinstance(block, dict) and block.get("type") == "tool_use":
                call = {"id": str(block.get("id", "")), "name": str(block.get("name", ""))}
                self._calls[as_int(payload.get("index"))] = {**call, "arguments": ""}
        elif kind == "message_start":
            message = payload.get("message") or {}
            usage = message.get("usage") if isinstance(message, dict) else None
            self.count(usage)
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            if isinstance(delta, dict) and delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self.count(payload.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            raise ProviderFailure(provider, error_message(json.dumps(payload)))
        return ""

    def _input_piece(self, index: Any, piece: Any) -> str:
        """Absorb a piece of a tool call's input; return it when it is the answer's."""
        call = self._calls.get(as_int(index))
        if call is None or not isinstance(piece, str):
            return ""
        call["arguments"] += piece
        if call["name"] == self.answer_tool:
            self.answered = True
            return piece
        return ""

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the stream, the answer's left out, in their blocks' order."""
        return tuple(
            ToolCall(c["id"], c["name"], c["arguments"] or "{}")
            for _, c in sorted(self._calls.items())
            if c["name"] != self.answer_tool
        )

    def count(self, usage: Any) -> None:
        """Absorb a usage object (a message's, or a stream event's)."""
        # message_delta's counts are cumulative: the latest value wins.
        if not isinstance(usage, dict):
            return
        if any(k in usage for k in ("input_tokens", "cache_read_input_tokens")):
            self.input_tokens = max(self.input_tokens, _input_tokens(usage))
        if usage.get("cache_read_input_tokens") is not None:
            self.cached_tokens = as_int(usage["cache_read_input_tokens"])
        if usage.get("cache_creation_input_tokens") is not None:
            self.cache_write_tokens = as_int(usage["cache_creation_input_tokens"])
        if "output_tokens" in usage:
            self.output_tokens = as_int(usage["output_tokens"])
        details = usage.get("output_tokens_details")
        if isinstance(details, dict) and details.get("thinking_tokens") is not None:
            self.reasoning_tokens = as_int(details["thinking_tokens"])

    def usage(self) -> TokenUsage:
        """The usage so far; the prompt is every input token, the cache's included."""
        return TokenUsage(
            self.input_tokens,
            self.output_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )


def _input_tokens(usage: dict[str, Any]) -> int:
    # input_tokens leaves out the cached part of the prompt; the prompt is all three.
    return sum(
        as_int(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _body(request: CompletionRequest, stream: bool) -> dict[str, Any]:
    body = {k: v for k, v in request.parameters.items() if k not in _RESERVED}
    body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    body["model"] = request.model
    if request.chat:
        chat_body(request, body)
        if stream:
            body["stream"] = True
        return body
    messages = [wire_message(m) for m in request.messages]
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    if system:
        body["system"] = system
    body["messages"] = [m for m in messages if m["role"] != "system"]
    if stream:
        body["stream"] = True
    return body
