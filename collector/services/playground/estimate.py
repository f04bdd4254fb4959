"""A playground run's cost estimate, made before anything is called (docs/api-notes.md,
"Playground").

Input tokens are counted on the rendered request of each cell: with tiktoken for the models it
knows (``o200k_base`` for gpt-4o, gpt-4.1, the o-series and gpt-5, ``cl100k_base`` for older
ones) and ``o200k_base`` for any other model routed to OpenAI by its name, in OpenAI's chat
format (3 tokens a message, plus its role's and text's tokens, plus 3 that prime the reply);
for other models (Anthropic's, self-hosted ones) a documented approximation: a token per 4
characters of each message, rounded up, plus 4 a message and 3 for the reply. Tools and a
response format's schema are counted as their JSON text. Output tokens are the request's
``max_tokens`` (or ``max_completion_tokens``), else :data:`DEFAULT_OUTPUT_TOKENS`. Both are
priced with the request log's own table; a model without a known price counts 0.

tiktoken reads its encodings from a download (cached in ``TIKTOKEN_CACHE_DIR``): each encoding
is loaded once, lazily, on a thread of its own, and a run waits for it at most
:data:`LOAD_WAIT_SECONDS`; an encoding that cannot be loaded (offline, without the cache) is
remembered as missing and its models are approximated, which the estimate says
(``estimate_method``). A run never fails for want of a tokenizer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import tiktoken
from tiktoken.model import encoding_name_for_model

from ...providers import CompletionRequest, wire_message
from ...providers.routing import provider_for
from ..pricing import PriceBook

logger = logging.getLogger("promptrail.playground")

DEFAULT_OUTPUT_TOKENS = 1024
LOAD_WAIT_SECONDS = 5.0
# OpenAI's chat format: tokens around each message, and those that prime the reply.
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING_TOKENS = 3
# The approximation: characters a token, and the tokens around each message.
CHARS_PER_TOKEN = 4
APPROXIMATE_TOKENS_PER_MESSAGE = 4

Method = Literal["tiktoken", "approximate"]


class Tokenizers:
    """tiktoken's encodings, each loaded once on a thread of its own; a failure is kept."""

    def __init__(self, wait_seconds: float = LOAD_WAIT_SECONDS) -> None:
        self._wait = wait_seconds
        self._loads: dict[str, Future[tiktoken.Encoding | None]] = {}
        self._lock = threading.Lock()

    def _load(self, name: str) -> Future[tiktoken.Encoding | None]:
        with self._lock:
            future = self._loads.get(name)
            if future is None:
                future = self._loads[name] = Future()
                # A daemon thread: a download that hangs never holds the process at exit.
                threading.Thread(
                    target=_load_into, args=(name, future), name=f"tiktoken-{name}", daemon=True
                ).start()
            return future

    async def encoding(self, name: str) -> tiktoken.Encoding | None:
        """The encoding ``name``, or None when it cannot be loaded (or not in time)."""
        future = self._load(name)
        if not future.done():
            try:
                await asyncio.wait_for(asyncio.wrap_future(future), self._wait)
            except TimeoutError:
                return None
        return future.result()

    def wait(self, name: str, timeout: float | None = None) -> tiktoken.Encoding | None:
        """Load ``name`` and wait for it (from a thread, or before serving)."""
        return self._load(name).result(timeout)


def _load_into(name: str, future: Future[tiktoken.Encoding | None]) -> None:
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception as exc:  # offline without the cache, a corrupt file: approximate
        logger.warning(
            "tiktoken encoding %s unavailable (%s); playground estimates approximate its "
            "models' tokens",
            name,
            type(exc).__name__,
        )
        future.set_result(None)
    else:
        future.set_result(encoding)


TOKENIZERS = Tokenizers()
"""The process's encodings (tiktoken keeps one copy of each per process anyway)."""


def encoding_name(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model (None: approximate its tokens).

    >>> encoding_name("gpt-4o-mini"), encoding_name("gpt-4"), encoding_name("claude-3-5-haiku")
    ('o200k_base', 'cl100k_base', None)
    """
    try:
        return encoding_name_for_model(model)
    except KeyError:
        pass
    routed = provider_for(model)
    return "o200k_base" if routed is not None and routed[0] == "openai" else None


def _texts(request: CompletionRequest) -> list[tuple[str, str]]:
    """Each message's (role, text): its text parts and tool calls as they are sent."""
    out: list[tuple[str, str]] = []
    for message in request.messages:
        wire = wire_message(message)
        content = wire.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        else:
            text = ""
        if wire.get("tool_calls"):
            text += json.dumps(wire["tool_calls"], ensure_ascii=False)
        out.append((str(wire.get("role", "")), text))
    return out


def _extras(request: CompletionRequest) -> str:
    """Tools and a response format's schema, as the JSON text counted with the messages."""
    parts = [
        json.dumps(x, ensure_ascii=False) for x in (request.tools, request.response_format) if x
    ]
    return "".join(parts)


def count_input(request: CompletionRequest, encoding: tiktoken.Encoding | None) -> int:
    """The input tokens of a request: by ``encoding``, else approximated."""
    messages = _texts(request)
    extras = _extras(request)
    if encoding is not None:
        total = REPLY_PRIMING_TOKENS + len(encoding.encode(extras, disallowed_special=()))
        for role, text in messages:
            total += TOKENS_PER_MESSAGE + len(encoding.encode(role, disallowed_special=()))
            total += len(encoding.encode(text, disallowed_special=()))
        return total
    total = REPLY_PRIMING_TOKENS + _approximate(extras)
    for _, text in messages:
        total += APPROXIMATE_TOKENS_PER_MESSAGE + _approximate(text)
    return total


def _approximate(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def output_tokens(parameters: Mapping[str, Any]) -> int:
    """The output a request may make: its ``max_tokens``, else the default."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = parameters.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_TOKENS


@dataclass(frozen=True)
class Priced:
    """One request's estimate: tokens in and out, its cost, how the input was counted."""

    input_tokens: int
    output_tokens: int
    cost_usd: float
    method: Method


@dataclass(frozen=True)
class Estimate:
    """A run's estimate: the sums over its cells."""

    cost_usd: float
    input_tokens: int
    output_tokens: int
    method: Method


async def price(
    provider: str,
    request: CompletionRequest,
    prices: PriceBook,
    at: datetime,
    tokenizers: Tokenizers = TOKENIZERS,
) -> Priced:
    """Estimate one request sent to ``provider``."""
    name = encoding_name(request.model) if provider == "openai" else None
    encoding = None if name is None else await tokenizers.encoding(name)
    tokens_in = count_input(request, encoding)
    tokens_out = output_tokens(request.parameters)
    cost = prices.cost(provider, request.model, tokens_in, tokens_out, at=at)
    return Priced(tokens_in, tokens_out, cost or 0.0, "tiktoken" if encoding else "approximate")


def total(cells: Sequence[Priced]) -> Estimate:
    """Sum cell estimates: ``tiktoken`` only when every cell was counted by tiktoken."""
    method: Method = (
        "tiktoken" if cells and all(c.method == "tiktoken" for c in cells) else "approximate"
    )
    return Estimate(
        round(sum(c.cost_usd for c in cells), 10),
        sum(c.input_tokens for c in cells),
        sum(c.output_tokens for c in cells),
        method,
    )
