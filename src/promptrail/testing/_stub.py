"""What both provider stubs share: the per-test script, the call log, the request handling
up to the wire format, the stream tracking."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._conversation import answer_schema, forced_tool, instance, offered_tools, tool_results
from ._conversation import tool_to_call as offered_tool_to_call
from ._replies import Replies, ReplyRule, ToolCallReply, echo, last_user_text

# A demo stub runs for days: it keeps the newest calls only.
KEPT_CALLS = 10_000
FIXED_REPLY = "Hello from the stub provider."


@dataclass
class Script:
    """What the stub does with the next requests; a test sets it before acting."""

    reply: str = FIXED_REPLY
    """The answer to every request (unless ``replies`` derives it from the request)."""
    replies: Replies | None = None
    """Answer from the request instead (:class:`Replies`: rules on the last user message,
    else an echo of it; ``reply`` for what no rule matches when its echo is off)."""
    tool_call: ToolCallReply | None = None
    """Answer with a call of this tool instead of text (finish reason ``tool_calls``,
    Anthropic's ``tool_use``), whole or streamed."""
    truncated: bool = False
    """The text answer stops at the token limit (OpenAI's finish reason ``length``,
    Anthropic's stop reason ``max_tokens``)."""
    failures: list[int] = field(default_factory=list)
    """Statuses answered, one per request, before the stub succeeds."""
    retry_after: str | None = None
    first_byte_delay: float = 0.0
    """Seconds before the status line (headers) of a successful answer."""
    chunk_delay: float = 0.0
    break_after_chunks: int | None = None
    """Break a stream off after this many text chunks."""
    break_with: Literal["drop", "error_event"] = "drop"
    """``drop``: the connection ends mid-body; ``error_event``: the provider's error event."""
    cached_tokens: int = 0
    """Prompt tokens the answer reports read from the provider's prompt cache: a cached
    prefix on top of the prompt's words (OpenAI ``prompt_tokens_details.cached_tokens``,
    counted in ``prompt_tokens``; Anthropic ``cache_read_input_tokens``, outside
    ``input_tokens``)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the cache (Anthropic ``cache_creation_input_tokens``, outside
    ``input_tokens``; OpenAI reports none)."""
    reasoning_tokens: int = 0
    """Hidden output tokens spent reasoning, on top of the reply's words (OpenAI
    ``completion_tokens_details.reasoning_tokens``, Anthropic
    ``output_tokens_details.thinking_tokens``; counted in the output tokens)."""


@dataclass(frozen=True)
class Call:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    client_port: int | None = None
    """The caller's TCP port: calls on one kept-alive connection share it."""


class StubProvider:
    """Base of the stubs: scripted failures and delays, and what happened to each stream.

    A stub serves one ``POST`` route (``path``). Every request is logged, then failed if the
    script says so, then checked (:meth:`invalid`), delayed, and answered (:meth:`answer`);
    a stub writes only its wire format: :meth:`invalid`, :meth:`answer` and :meth:`error`.
    """

    url = ""
    path = ""
    """The route a stub serves (``/v1/chat/completions``, ``/v1/messages``)."""

    def __init__(self) -> None:
        self.reset()
        self.app = Starlette(routes=[Route(self.path, self._receive, methods=["POST"])])

    async def _receive(self, request: Request) -> Response:
        body = await request.json()
        port = request.client.port if request.client else None
        self.record(request.url.path, dict(request.headers), body, port)
        status = self.next_failure()
        if status is not None:
            return self.error(status)
        problem = self.invalid(request, body)
        if problem:
            return self.error(400, problem)
        await self.pause(self.script.first_byte_delay)
        return self.answer(body)

    def invalid(self, request: Request, body: dict[str, Any]) -> str | None:
        """Return what the provider would refuse in a request, or None."""
        raise NotImplementedError

    def answer(self, body: dict[str, Any]) -> Response:
        """Answer a valid request: the whole reply, or a stream of it."""
        raise NotImplementedError

    def error(self, status: int, message: str | None = None) -> Response:
        """Answer with the provider's error body for ``status``."""
        raise NotImplementedError

    def retry_headers(self) -> dict[str, str]:
        """The ``retry-after`` header the script asks for, if any."""
        return {"retry-after": self.script.retry_after} if self.script.retry_after else {}

    def reset(self) -> None:
        """Forget the previous test: default script, no calls, no streams."""
        self.script = Script()
        self.calls: list[Call] = []
        self.streams_completed = 0
        self.streams_cancelled = threading.Event()
        self._generation = getattr(self, "_generation", 0) + 1

    def reply_to(self, body: dict[str, Any]) -> str:
        """The answer to a request: the script's ``reply``, or what its ``replies`` derive
        from the request's last user message (or the tool results it ends with); an instance
        of the answer's schema when an OpenAI request asks for a ``json_schema`` answer and no
        rule gives the reply (``_conversation.py``)."""
        script = self.script
        if script.replies is None:
            return script.reply
        asked, after_tools = _asked(body)
        rule = _rule(script.replies, asked, after_tools)
        if rule is not None and rule.tool_call is None:
            return rule.reply
        said = self._said(asked)
        schema = answer_schema(body)
        return said if schema is None else json.dumps(instance(schema, said))

    def tool_call_for(self, body: dict[str, Any]) -> ToolCallReply | None:
        """The tool call to answer a request with, or None: answer with text.

        The script's ``tool_call`` when set (every request); else, with ``replies``: the
        tool call of the rule that matches the last user message, else a call of the tool the
        request forces or of the first it offers, its arguments made from the tool's schema.
        A conversation that ends with tool results gets text, unless a tool is forced.
        """
        script = self.script
        if script.tool_call is not None or script.replies is None:
            return script.tool_call
        asked, after_tools = _asked(body)
        if after_tools:
            forced = forced_tool(body)
            tool = next((t for t in offered_tools(body) if t.name == forced), None)
        else:
            rule = _rule(script.replies, asked, after_tools)
            if rule is not None:
                return rule.tool_call
            tool = offered_tool_to_call(body)
        if tool is None:
            return None
        arguments = instance(tool.schema, self._said(asked))
        turn = 1 + sum(
            1
            for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "assistant"
        )
        return ToolCallReply(
            tool.name, arguments if isinstance(arguments, dict) else {}, id=f"call_stub{turn}"
        )

    def _said(self, asked: str | None) -> str:
        """The text answer to ``asked`` when no rule gives one: its echo, else the fixed reply."""
        replies = self.script.replies
        if asked is None or replies is None or not replies.echo:
            return self.script.reply
        return echo(asked)

    def pieces(self, reply: str | None = None) -> list[str]:
        """Return a reply (the script's by default) split the way it is streamed: one word
        (and its space) a piece."""
        text = self.script.reply if reply is None else reply
        # Leading whitespace rides on the first word: the pieces join back to the reply.
        return re.findall(r"(?:^\s+)?\S+\s*", text) or [text]

    @staticmethod
    def count_words(messages: list[dict[str, Any]], system: str = "") -> int:
        """Return the stub's prompt token count: the words of every message."""
        words = len(system.split())
        for message in messages:
            content = message.get("content")
            words += len(content.split()) if isinstance(content, str) else 0
        return words

    def record(
        self,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any],
        client_port: int | None = None,
    ) -> None:
        """Log a received request (the newest ``KEPT_CALLS``: a demo stub runs for days)."""
        self.calls.append(Call(path, headers, body, client_port))
        if len(self.calls) > 2 * KEPT_CALLS:
            del self.calls[:-KEPT_CALLS]

    def next_failure(self) -> int | None:
        """Return the status to fail this request with, if the script says so."""
        return self.script.failures.pop(0) if self.script.failures else None

    async def tracked(self, events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Relay a stream's bytes, noting whether it ran to its end or was cancelled."""
        # Bound now: a stream of an earlier test ending late must not count in this one.
        cancelled, generation = self.streams_cancelled, self._generation
        finished = broken = False
        try:
            async for data in events:
                yield data
            finished = True
        except StreamBroken:
            broken = True
            raise
        finally:
            if finished and generation == self._generation:
                self.streams_completed += 1
            elif not finished and not broken:
                cancelled.set()

    async def pause(self, seconds: float) -> None:
        """Sleep, if the script asks for a delay."""
        if seconds > 0:
            await asyncio.sleep(seconds)


class StreamBroken(RuntimeError):
    """Raised inside a stub's stream to end the connection mid-body (the ``drop`` script)."""


def _asked(body: dict[str, Any]) -> tuple[str | None, bool]:
    """What a request asks the model to answer: the tool results its conversation ends with
    (and True), else its last user message's text (and False); None: no text."""
    messages = body.get("messages")
    results = tool_results(messages)
    if results is not None:
        return (results if results.strip() else None), True
    return last_user_text(messages), False


def _rule(replies: Replies, asked: str | None, after_tools: bool) -> ReplyRule | None:
    """The first rule that applies to ``asked``; after tool results a tool-call rule does not
    (the model has its tool's answer: calling again would loop the app for ever)."""
    if asked is None:
        return None
    for rule in replies.rules:
        if rule.applies(asked) and not (after_tools and rule.tool_call is not None):
            return rule
    return None
