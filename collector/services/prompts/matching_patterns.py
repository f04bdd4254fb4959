"""Chat versions compiled into patterns, and records' inputs read as messages to compare.

A version's messages are parsed by the library the collector renders with
(``promptrail._mustache``, pystache): the literal text must be equal, a variable (``{{name}}``,
``{{{name}}}``, ``{{a.b}}``, ``{{.}}``) matches any text, a section or inverted section matches
any text too (what it would render depends on values), a comment matches nothing, and a
placeholder matches any number of messages. Roles must be equal and in order; a message's
content is compared part by part (a string is one text part; text parts and image URLs are
compared, other parts and fields are not). What is linked is in :mod:`.matching`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from promptrail._mustache import MustacheError, parse_mustache

from ...store.prompts import PromptVersionRow

# How many leading literal characters of a version's first message file it in the index.
PREFIX = 64
# A message as compared: its role and its content's (kind, text) items.
Message = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class TextPattern:
    """One template text compiled: its literal chunks, with a tag between each two (its
    variable's name, or None for a tag that stands for any text), and its leading literal.

    Every tag stands for any text, so the text matches when it starts with the first chunk,
    ends with the last, and holds the others in order between them: found leftmost, each
    tag's text is what a lazy match would give it. ``str.find`` calls, linear in the text,
    where a regular expression of several lazy groups could backtrack for as long as a
    record's text is long to the power of its groups.
    """

    chunks: tuple[str, ...]
    names: tuple[str | None, ...]

    @property
    def prefix(self) -> str:
        return self.chunks[0]

    @classmethod
    def compile(cls, template: str) -> TextPattern:
        chunks: list[str] = []
        names: list[str | None] = []
        literal: list[str] = []
        for node in parse_mustache(template)._parse_tree:
            if isinstance(node, str):
                literal.append(node)
                continue
            kind = type(node).__name__
            if kind in ("_CommentNode", "_ChangeNode"):
                continue  # renders nothing: the literal text goes on
            chunks.append("".join(literal))
            literal = []
            key = str(getattr(node, "key", ""))
            plain = kind in ("_EscapeNode", "_LiteralNode") and key != "." and "." not in key
            names.append(key if plain else None)
        chunks.append("".join(literal))
        return cls(tuple(chunks), tuple(names))

    def match(self, text: str, found: list[tuple[str, str]]) -> bool:
        """Whether ``text`` matches; the plain variables' text is added to ``found``."""
        chunks = self.chunks
        first, last = chunks[0], chunks[-1]
        if not self.names:
            return text == first
        end = len(text) - len(last)
        if end < len(first) or not text.startswith(first) or not text.endswith(last):
            return False
        at = len(first)
        names = self.names
        for index in range(1, len(chunks) - 1):
            chunk = chunks[index]
            place = text.find(chunk, at, end)
            if place < 0:
                return False
            name = names[index - 1]
            if name is not None:
                found.append((name, text[at:place]))
            at = place + len(chunk)
        name = names[-1]
        if name is not None:
            found.append((name, text[at:end]))
        return True


@dataclass(frozen=True)
class Step:
    """A template message: its role and its content's (kind, compiled text) items."""

    role: str
    items: tuple[tuple[str, TextPattern], ...]

    def match(self, message: Message, found: list[tuple[str, str]]) -> bool:
        role, items = message
        if role != self.role or len(items) != len(self.items):
            return False
        for (kind, text), (want, pattern) in zip(items, self.items, strict=True):
            if kind != want or not pattern.match(text, found):
                return False
        return True


@dataclass(frozen=True)
class CompiledVersion:
    """A chat version compiled: its steps (None: a placeholder) and its order of recency."""

    prompt_id: str
    name: str
    version: int
    order: tuple[float, int, str]
    steps: tuple[Step | None, ...]
    # How many fixed messages follow each step (so a placeholder leaves them room).
    after: tuple[int, ...]
    fixed: int  # how many messages the version needs at least

    def key(self) -> tuple[str, str] | None:
        """(first role, leading literal), None when it opens with a placeholder: what a record
        matching it begins with. :func:`filing_key` is a prefix of it, read without compiling."""
        first = self.steps[0] if self.steps else None
        if first is None:
            return None
        if first.items and first.items[0][0] == "text":
            return first.role, first.items[0][1].prefix[:PREFIX]
        return first.role, ""

    def match(self, messages: Sequence[Message]) -> dict[str, str] | None:
        """The plain variables' text when the messages match, else None."""
        found: list[tuple[str, str]] = []
        if None not in self.steps:
            # No placeholder: message i against step i, no search (most versions).
            if len(messages) != len(self.steps):
                return None
            for step, message in zip(self.steps, messages, strict=True):
                if step is None or not step.match(message, found):
                    return None
            return found_values(found)
        return found_values(found) if self._walk(0, messages, 0, found) else None

    def _walk(
        self, at: int, messages: Sequence[Message], index: int, found: list[tuple[str, str]]
    ) -> bool:
        if at == len(self.steps):
            return index == len(messages) and found_values(found) is not None
        step = self.steps[at]
        mark = len(found)
        if step is None:
            for end in range(index, len(messages) - self.after[at] + 1):
                if self._walk(at + 1, messages, end, found):
                    return True
                del found[mark:]
            return False
        if (
            index < len(messages)
            and step.match(messages[index], found)
            and self._walk(at + 1, messages, index + 1, found)
        ):
            return True
        del found[mark:]
        return False


def found_values(found: list[tuple[str, str]]) -> dict[str, str] | None:
    """The variables' text; None when one variable stood for two different texts (a template
    renders one value everywhere it is used)."""
    values: dict[str, str] = {}
    for name, text in found:
        if values.setdefault(name, text) != text:
            return None
    return values


def compile_version(row: PromptVersionRow) -> CompiledVersion | None:
    """Compile a chat version's messages; None for a text version or one that cannot match."""
    if row.type != "chat" or not row.messages:
        return None
    steps: list[Step | None] = []
    try:
        for message in row.messages:
            if message.get("type") == "placeholder":
                steps.append(None)
                continue
            items = content_items(message.get("content"))
            if items is None:
                return None
            steps.append(
                Step(str(message.get("role")), tuple((k, TextPattern.compile(t)) for k, t in items))
            )
    except MustacheError:
        return None  # stored versions parse (checked at write); nothing to link to if not
    after = [sum(step is not None for step in steps[i + 1 :]) for i in range(len(steps))]
    return CompiledVersion(
        prompt_id=row.prompt_id,
        name=row.name,
        version=row.version,
        order=order_of(row),
        steps=tuple(steps),
        after=tuple(after),
        fixed=sum(step is not None for step in steps),
    )


def is_chat(row: PromptVersionRow) -> bool:
    """Whether the version has messages a record could match."""
    return row.type == "chat" and bool(row.messages)


def order_of(row: PromptVersionRow) -> tuple[float, int, str]:
    """A version's order of recency: the most recently created matching version wins."""
    return row.created_at.timestamp(), row.version, row.prompt_id


def filing_key(row: PromptVersionRow) -> tuple[str, str] | None:
    """Where a chat version is filed, read from its first message without compiling it: the
    role and the text before its first tag (None when it opens with a placeholder).

    A prefix of the compiled version's own :meth:`CompiledVersion.key`, so a record that
    matches the version begins with it: Mustache's literal text before the first ``{{`` is
    kept as written, except that a standalone tag (a section or a comment alone on its line)
    takes the spaces before it on that line, hence the right strip; a comment's text is left
    out, so the literal may go on past the first tag, never stop before it.
    """
    first = (row.messages or [{}])[0]
    if first.get("type") == "placeholder":
        return None
    role = str(first.get("role"))
    items = content_items(first.get("content"))
    if not items or items[0][0] != "text":
        return role, ""
    text = items[0][1]
    cut = text.find("{{")
    literal = text if cut < 0 else text[:cut].rstrip(" \t")
    return role, literal[:PREFIX]


def content_items(content: Any) -> tuple[tuple[str, str], ...] | None:
    """A message content as (kind, text) items: a string is one text part; text parts (OpenAI's
    ``text``, OpenTelemetry's ``content``) and image URLs count, other parts are left out, as
    is empty text. None when the content is no message content at all."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (("text", content),) if content else ()
    if not isinstance(content, list):
        return None
    items: list[tuple[str, str]] = []
    for part in content:
        if not isinstance(part, dict):
            return None
        kind = part.get("type")
        if kind == "text":
            text = part.get("text", part.get("content"))
            if not isinstance(text, str):
                return None
            if text:
                items.append(("text", text))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                return None
            items.append(("image", url))
    return tuple(items)


def record_messages(value: Any) -> list[Message] | None:
    """A record's ``input`` as messages to compare, or None when it is not a list of chat
    messages (each an object with a text ``role`` and a content or OpenTelemetry ``parts``).
    An Anthropic call's ``{"system", "messages"}`` (as the SDK's capture logs it) reads as its
    system text as a first system message, then its messages."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        system = value.get("system")
        head = [] if system is None else [{"role": "system", "content": system}]
        value = [*head, *value["messages"]]
    if not isinstance(value, list) or not value:
        return None
    messages: list[Message] = []
    for raw in value:
        if not isinstance(raw, dict):
            return None
        role = raw.get("role")
        if not isinstance(role, str):
            return None
        content = raw.get("content")
        if content is None and "parts" in raw:
            content = raw["parts"]
        items = content_items(content)
        if items is None:
            return None
        messages.append((role, items))
    return messages
