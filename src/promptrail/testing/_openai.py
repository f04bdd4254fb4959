"""An OpenAI chat-completions server: ``POST /v1/chat/completions``, whole or streamed.

Point a client at ``<url>/v1`` (the OpenAI SDK's ``base_url`` and ``OPENAI_BASE_URL`` include
the version path). Streams send a role chunk, one chunk per word of the reply, a chunk with
``finish_reason``, a usage chunk (only when ``stream_options.include_usage`` asks for it, as
OpenAI does) and ``data: [DONE]``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ._replies import ToolCallReply
from ._stub import StreamBroken, StubProvider

_ERRORS = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


class OpenAIStub(StubProvider):
    """A scriptable OpenAI chat-completions stub (see :class:`Script`)."""

    path = "/v1/chat/completions"

    def invalid(self, request: Request, body: dict[str, Any]) -> str | None:
        """Refuse a request without a model or messages."""
        if not body.get("model") or not isinstance(body.get("messages"), list):
            return "model and messages are required"
        return None

    def answer(self, body: dict[str, Any]) -> Response:
        """A chat completion, or its chunks when the request streams."""
        call = self.tool_call_for(body)
        reply = "" if call else self.reply_to(body)
        usage = self._usage(body, call.arguments_json if call else reply)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = self._chunks(body["model"], reply, usage if include_usage else None, call)
            return StreamingResponse(self.tracked(events), media_type="text/event-stream")
        completion = self._completion(body["model"], reply, usage)
        if call:
            choice = completion["choices"][0]
            choice["message"]["content"] = None
            choice["message"]["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
            ]
            choice["finish_reason"] = "tool_calls"
        return JSONResponse(completion)

    def error(self, status: int, message: str | None = None) -> Response:
        """OpenAI's error body."""
        error = {
            "message": message or f"The stub failed this request with {status}.",
            "type": _ERRORS.get(status, "server_error"),
            "param": None,
            "code": None,
        }
        return JSONResponse({"error": error}, status_code=status, headers=self.retry_headers())

    def _usage(self, body: dict[str, Any], reply: str) -> dict[str, Any]:
        script = self.script
        # Cached and reasoning tokens are counted inside prompt and completion, as OpenAI does.
        prompt = self.count_words(body["messages"]) + script.cached_tokens
        completion = len(self.pieces(reply)) + script.reasoning_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": script.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": script.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _completion(self, model: str, reply: str, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-stub1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": reply,
                        "refusal": None,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": "length" if self.script.truncated else "stop",
                }
            ],
            "usage": usage,
            "system_fingerprint": "fp_stub",
        }

    async def _chunks(
        self,
        model: str,
        reply: str,
        usage: dict[str, Any] | None,
        call: ToolCallReply | None = None,
    ) -> AsyncIterator[bytes]:
        def envelope(choices: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "id": "chatcmpl-stub1",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_stub",
                "choices": choices,
            }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = envelope(
                [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            )
            if usage is not None:
                payload["usage"] = None
            return _data(payload)

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        if call:
            # The call's id and name come first, then its arguments in pieces, as OpenAI's do.
            head = {"index": 0, "id": call.id, "type": "function"}
            yield chunk(
                {"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}
            )
            for piece in self.pieces(call.arguments_json):
                await self.pause(self.script.chunk_delay)
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield chunk({}, finish="tool_calls")
            if usage is not None:
                yield _data({**envelope([]), "usage": usage})
            yield b"data: [DONE]\n\n"
            return
        for number, piece in enumerate(self.pieces(reply)):
            if number == self.script.break_after_chunks:
                if self.script.break_with == "drop":
                    raise StreamBroken("the stub drops the connection mid-stream")
                yield _data({"error": {"message": "The stub broke off.", "type": "server_error"}})
                return
            await self.pause(self.script.chunk_delay)
            yield chunk({"content": piece})
        yield chunk({}, finish="length" if self.script.truncated else "stop")
        if usage is not None:
            yield _data({**envelope([]), "usage": usage})
        yield b"data: [DONE]\n\n"


def _data(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()
