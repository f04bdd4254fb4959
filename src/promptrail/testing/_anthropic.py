"""An Anthropic Messages server: ``POST /v1/messages``, whole or streamed.

Point a client at ``<url>`` (the Anthropic SDK's ``base_url`` and ``ANTHROPIC_BASE_URL`` leave
out the version path). Like the real API it insists on ``anthropic-version``, ``max_tokens``
and messages of the roles user and assistant only (system text goes in ``system``). Streams
send message_start, content_block_start, a ping, one content_block_delta per word,
content_block_stop, message_delta (stop reason, output tokens) and message_stop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ._replies import ToolCallReply
from ._stub import StreamBroken, StubProvider

# Shaped like _openai.py's map on purpose: each provider names its error types its own way.
_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class AnthropicStub(StubProvider):
    """A scriptable Anthropic Messages stub (see :class:`Script`)."""

    path = "/v1/messages"

    def invalid(self, request: Request, body: dict[str, Any]) -> str | None:
        """Refuse what the Messages API refuses: no version header, max_tokens or messages."""
        if not request.headers.get("anthropic-version"):
            return "anthropic-version: header is required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        messages = body.get("messages")
        if not body.get("model") or not isinstance(messages, list) or not messages:
            return "model and messages are required"
        if any(m.get("role") not in ("user", "assistant") for m in messages):
            return "messages: roles must be user or assistant; use the system parameter"
        return None

    def answer(self, body: dict[str, Any]) -> Response:
        """A message, or its events when the request streams."""
        input_tokens = self.count_words(body["messages"], body.get("system") or "")
        call = self.tool_call_for(body)
        reply = call.arguments_json if call else self.reply_to(body)
        if body.get("stream"):
            events = self._events(body["model"], reply, input_tokens, call)
            return StreamingResponse(self.tracked(events), media_type="text/event-stream")
        content: dict[str, Any] = {"type": "text", "text": reply}
        if call:
            content = {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": call.arguments,
            }
        return JSONResponse(
            {
                "id": "msg_stub1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [content],
                "stop_reason": "tool_use" if call else self._text_stop(),
                "stop_sequence": None,
                "usage": self._usage(input_tokens, reply),
            }
        )

    def _text_stop(self) -> str:
        return "max_tokens" if self.script.truncated else "end_turn"

    def _usage(self, input_tokens: int, reply: str, started: bool = False) -> dict[str, Any]:
        """The usage object as the Messages API counts: ``input_tokens`` leave out the
        cache's reads and writes; the output tokens include the thinking. ``started``: the
        one in message_start, before any output (1 token, as the API says)."""
        script = self.script
        return {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": script.cache_write_tokens,
            "cache_read_input_tokens": script.cached_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": script.cache_write_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            **({"output_tokens": 1} if started else self._output_usage(reply)),
        }

    def _output_usage(self, reply: str) -> dict[str, Any]:
        thinking = self.script.reasoning_tokens
        usage: dict[str, Any] = {"output_tokens": len(self.pieces(reply)) + thinking}
        if thinking:
            usage["output_tokens_details"] = {"thinking_tokens": thinking}
        return usage

    def error(self, status: int, message: str | None = None) -> Response:
        """Anthropic's error body."""
        error = {
            "type": _ERRORS.get(status, "api_error"),
            "message": message or f"The stub failed this request with {status}.",
        }
        return JSONResponse(
            {"type": "error", "error": error}, status_code=status, headers=self.retry_headers()
        )

    async def _events(
        self, model: str, reply: str, input_tokens: int, call: ToolCallReply | None = None
    ) -> AsyncIterator[bytes]:
        message: dict[str, Any] = {
            "id": "msg_stub1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(input_tokens, reply, started=True),
        }
        yield _event("message_start", {"type": "message_start", "message": message})
        block: dict[str, Any] = {"type": "text", "text": ""}
        if call:
            # A tool call's input comes as pieces of JSON text, as the Messages API sends it.
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        start = {"type": "content_block_start", "index": 0, "content_block": block}
        yield _event("content_block_start", start)
        yield _event("ping", {"type": "ping"})
        for number, piece in enumerate(self.pieces(reply)):
            if number == self.script.break_after_chunks:
                if self.script.break_with == "drop":
                    raise StreamBroken("the stub drops the connection mid-stream")
                error = {"type": "overloaded_error", "message": "Overloaded"}
                yield _event("error", {"type": "error", "error": error})
                return
            await self.pause(self.script.chunk_delay)
            delta = {"type": "text_delta", "text": piece}
            if call:
                delta = {"type": "input_json_delta", "partial_json": piece}
            yield _event(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        yield _event("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if call else self._text_stop(),
                    "stop_sequence": None,
                },
                "usage": self._output_usage(reply),
            },
        )
        yield _event("message_stop", {"type": "message_stop"})


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
