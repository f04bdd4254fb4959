"""Model providers behind one small interface: a completion, whole or streamed.

A run renders a prompt version into a :class:`CompletionRequest` and hands it to the
:class:`Provider` its model routes to (``providers.routing``)::

    provider = OpenAIProvider(ProviderEndpoint("https://api.openai.com/v1", key), HttpPolicy())
    request = CompletionRequest(model="gpt-4o-mini", messages=(ChatMessage("user", "Hi"),))
    completion = await provider.complete(request)          # whole
    async for event in provider.stream(request):           # TextDelta..., then StreamEnd
        ...
    await provider.aclose()

Every failure of the provider (an HTTP error status after the bounded retries, a timeout, a
dropped connection, an error event inside a stream) surfaces as :class:`ProviderFailure`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]

__all__ = [
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "HttpPolicy",
    "Provider",
    "ProviderEndpoint",
    "ProviderFailure",
    "StreamEnd",
    "StreamEvent",
    "TextDelta",
    "TokenUsage",
    "ToolCall",
    "wire_message",
]


@dataclass(frozen=True)
class ChatMessage:
    """One message of the conversation sent to the model."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        """Return the ``{"role", "content"}`` shape both wire formats and the log use."""
        return {"role": self.role, "content": self.content}


def wire_message(message: ChatMessage | dict[str, Any]) -> dict[str, Any]:
    """Return a message in the OpenAI chat shape: a text run's :class:`ChatMessage`, or a chat
    prompt's rendered message (parts, tool calls, names), which is that shape already."""
    return message.as_dict() if isinstance(message, ChatMessage) else message


@dataclass(frozen=True)
class CompletionRequest:
    """What to ask the model: the messages, the provider's model name, model parameters.

    A chat prompt's run sends its rendered messages as they are (OpenAI's shape) and may add
    ``tools``, ``tool_choice`` and ``response_format`` (OpenAI's shapes too; a provider with
    another wire format converts them).
    """

    model: str
    messages: tuple[ChatMessage | dict[str, Any], ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    chat: bool = False
    """A chat prompt's run: its messages and answer are mapped to and from a provider's own
    shapes (finish reasons as OpenAI's); a text prompt's run is sent as it always was."""


@dataclass(frozen=True)
class ToolCall:
    """A call of one of the request's tools the model asked for; ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str

    def as_dict(self) -> dict[str, str]:
        """Return the ``{"id", "name", "arguments"}`` shape of a run's result and record."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class TokenUsage:
    """Tokens the provider reports for one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Counted inside prompt_tokens (cache reads and writes) and completion_tokens (reasoning),
    # whatever the provider's own convention (docs/api-notes.md, the prompt_tokens rule).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Return prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Completion:
    """A whole answer."""

    content: str
    finish_reason: str | None
    usage: TokenUsage
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class TextDelta:
    """Pieces of output text, each as the provider sent it: those that one read of its stream
    brought (at least one), handed on together so each layer above runs once a read."""

    pieces: tuple[str, ...]

    @property
    def content(self) -> str:
        """The pieces' text."""
        return "".join(self.pieces)


@dataclass(frozen=True)
class StreamEnd:
    """The last event of a stream that completed: why it stopped, and the usage."""

    finish_reason: str | None
    usage: TokenUsage
    tool_calls: tuple[ToolCall, ...] = ()


StreamEvent = TextDelta | StreamEnd


class ProviderFailure(Exception):
    """The provider did not answer, answered with an error, or broke off a stream."""

    def __init__(self, provider: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.message = f"{provider}: {message}"
        self.status = status


@dataclass(frozen=True)
class ProviderEndpoint:
    """Where a provider listens, the key it wants (None: send no key), and headers sent with
    every call (a connection's)."""

    base_url: str
    api_key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # the key and header values stay out of logs and tracebacks
        return f"ProviderEndpoint({self.base_url!r})"


@dataclass(frozen=True)
class HttpPolicy:
    """Timeouts, retries and pool size of the HTTP calls to a provider.

    Retries happen only before the first byte of a successful answer: on connection errors,
    429 and 5xx, with exponential backoff and jitter (``Retry-After`` is honoured up to
    ``retry_max_delay``). A read timeout is not retried: the provider may still be working on
    the request, and a retry would pay for it twice.
    """

    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    max_retries: int = 2
    retry_base_delay: float = 0.5
    retry_max_delay: float = 8.0
    max_connections: int = 1000


class Provider(Protocol):
    """A model provider: one completion, whole or streamed."""

    name: str

    async def complete(self, request: CompletionRequest) -> Completion:
        """Return the whole answer, or raise ProviderFailure."""
        ...

    def stream(self, request: CompletionRequest) -> AsyncGenerator[StreamEvent, None]:
        """Yield TextDelta pieces as they arrive, then one StreamEnd; raise ProviderFailure.

        StreamEnd comes as soon as the answer is complete; the iterator then reads the body's
        end, so that its connection goes back to the pool: a caller hands the answer on at
        StreamEnd and reads on to the iterator's end. Closing the iterator early (a client
        went away) closes the upstream connection.
        """
        ...

    async def aclose(self) -> None:
        """Close the provider's pooled connections."""
        ...
