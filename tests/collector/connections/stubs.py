"""A small provider stand-in for the connection tests: it answers every request with the
status and JSON body a test sets (the providers' exact error bodies), and keeps what it got."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A whole chat completion, as OpenAI answers it.
OPENAI_OK: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "p"}, "finish_reason": "length"}
    ],
    "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9},
}


@dataclass
class WireStub:
    """What the stand-in answers next, and the requests it got."""

    url: str = ""
    status: int = 200
    body: dict[str, Any] = field(default_factory=lambda: dict(OPENAI_OK))
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
