"""What a stub answers when its reply is not fixed: rules matched against the last user
message, else an echo of that message.

The fixed reply (``Script.reply``, "Hello from the stub provider.") makes every answer the
same, so two prompt versions can never differ. :class:`Replies` derives the answer from the
request instead, deterministically: the first rule whose ``match`` (a substring, any case) or
``regex`` (searched) is found in the text of the last user message gives its ``reply``;
without a matching rule the answer is ``Echo: `` and that text, its whitespace runs folded to
one space (a rule without ``match`` or ``regex`` matches everything). ``promptrail
stub-provider`` answers this way by default; ``--replies FILE`` reads the rules from a JSON
file (:meth:`Replies.load`), ``--fixed`` turns the echo off (unmatched requests get the fixed
reply). A request with no user text (only a system message, or only images) gets the fixed
reply too. A rule may answer with a tool call instead of a reply
(``{"match": "weather", "tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}``):
the stub then answers as the provider does when the model calls a tool, whole or streamed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ECHO_PREFIX = "Echo: "
MAX_RULES = 1000
_RULE_KEYS = {"match", "regex", "reply", "tool_call"}


@dataclass(frozen=True)
class ToolCallReply:
    """A tool call a stub answers with: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = "call_stub1"

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text the wire carries."""
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class ReplyRule:
    """One rule: its ``reply`` answers a request whose last user message contains ``match``
    (any case) or in which ``regex`` is found; with neither, every request."""

    reply: str
    match: str | None = None
    regex: re.Pattern[str] | None = None
    tool_call: ToolCallReply | None = None
    """Answer with this tool call instead of text (``reply`` is then empty)."""

    def applies(self, message: str) -> bool:
        """Whether this rule answers a request whose last user message is ``message``."""
        if self.match is not None:
            return self.match.casefold() in message.casefold()
        if self.regex is not None:
            return self.regex.search(message) is not None
        return True


@dataclass(frozen=True)
class Replies:
    """How a stub picks its answer from the request: the first rule that applies, else an
    echo of the last user message (``echo=False``: else the script's fixed reply)."""

    rules: tuple[ReplyRule, ...] = ()
    echo: bool = True

    def reply(self, message: str | None, fixed: str) -> str:
        """The answer to a request whose last user message is ``message`` (None: no text)."""
        if message is None:
            return fixed
        for rule in self.rules:
            if rule.applies(message):
                return rule.reply
        return echo(message) if self.echo else fixed

    def tool_call(self, message: str | None) -> ToolCallReply | None:
        """The tool call answering a request whose last user message is ``message``: the
        first rule that applies, when it is a tool-call rule."""
        if message is None:
            return None
        for rule in self.rules:
            if rule.applies(message):
                return rule.tool_call
        return None

    @classmethod
    def from_json(cls, document: Any, *, echo: bool = True) -> Replies:
        """The rules of a JSON document: a list of ``{"match"|"regex": ..., "reply": ...}``.

        Raises ValueError saying which rule is wrong and why.
        """
        if not isinstance(document, list):
            raise ValueError('the replies are a JSON list of {"match": ..., "reply": ...}')
        if len(document) > MAX_RULES:
            raise ValueError(f"at most {MAX_RULES} rules")
        return cls(tuple(_rule(n, raw) for n, raw in enumerate(document, 1)), echo=echo)

    @classmethod
    def load(cls, path: str | Path, *, echo: bool = True) -> Replies:
        """Read rules from a JSON file (:meth:`from_json`); ValueError names what is wrong."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path} is not JSON: {exc}") from None
        try:
            return cls.from_json(document, echo=echo)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _rule(number: int, raw: Any) -> ReplyRule:
    where = f"rule {number}"
    if not isinstance(raw, Mapping):
        raise ValueError(f'{where} is not an object like {{"match": ..., "reply": ...}}')
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ValueError(f"{where} has unknown keys {sorted(unknown)}: use match, regex, reply")
    call = _tool_call(where, raw["tool_call"]) if "tool_call" in raw else None
    reply = raw.get("reply", "" if call else None)
    if call is not None and reply:
        raise ValueError(f"{where} gives reply and tool_call: one of them")
    if call is None and (not isinstance(reply, str) or not reply.strip()):
        raise ValueError(f"{where} needs a reply: a non-empty string (or a tool_call)")
    if "match" in raw and "regex" in raw:
        raise ValueError(f"{where} gives match and regex: one of them")
    match, pattern = raw.get("match"), raw.get("regex")
    if "match" in raw and (not isinstance(match, str) or not match):
        raise ValueError(f"{where}: match is a non-empty string")
    if "regex" in raw:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{where}: regex is a non-empty string")
        try:
            return ReplyRule(reply, regex=re.compile(pattern), tool_call=call)
        except re.error as exc:
            raise ValueError(f"{where}: the regex does not compile: {exc}") from None
    return ReplyRule(reply, match=match, tool_call=call)


def _tool_call(where: str, raw: Any) -> ToolCallReply:
    """A rule's ``{"name", "arguments"?, "id"?}`` tool call."""
    if not isinstance(raw, Mapping) or set(raw) - {"name", "arguments", "id"}:
        raise ValueError(f'{where}: tool_call is {{"name", "arguments"?, "id"?}}')
    name, arguments = raw.get("name"), raw.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: tool_call needs a name")
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{where}: tool_call.arguments is a JSON object")
    call_id = raw.get("id", "call_stub1")
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"{where}: tool_call.id is a non-empty string")
    return ToolCallReply(name, dict(arguments), call_id)


def echo(message: str) -> str:
    """The echo answer: ``Echo: `` and the message, its whitespace runs one space each."""
    return ECHO_PREFIX + " ".join(message.split())


def last_user_text(messages: Any) -> str | None:
    """The text of the last user message of an OpenAI or Anthropic request, its text parts
    joined by a newline; None when there is no user message or it holds no text."""
    if not isinstance(messages, Sequence):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _text(message.get("content"))
    return None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, Sequence):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ]
        text = "\n".join(parts)
        return text if text.strip() else None
    return None
