"""What the tests of a captured openai chat stream share: the usage a stream's servers
send, a stream answered in process, and the text of the chunks a caller got."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.provider_clients import openai_answering

MESSAGES = [{"role": "user", "content": "Count for me"}]
USAGE = {
    "prompt_tokens": 11,
    "completion_tokens": 7,
    "total_tokens": 18,
    "prompt_tokens_details": {"cached_tokens": 4},
    "completion_tokens_details": {"reasoning_tokens": 2},
}


def stream_of(body: bytes | Iterator[bytes]) -> Any:
    """A streamed chat completion over ``body`` (one read, or one read a piece)."""
    return openai_answering(body).chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )


def text_of(chunks: list[Any]) -> str:
    """The text the caller's chunks carried."""
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
