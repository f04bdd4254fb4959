"""Linking records that name no prompt to the chat version their messages match.

A record that arrives without a ``prompt_name`` (an OTLP span of another SDK, messages an app
built by hand) whose ``input`` is a list of chat messages is compared with the chat versions of
its project: each version's messages are compiled once into patterns, parsed by the library the
collector renders with (``promptrail._mustache``, pystache), where the literal text must be
equal, a variable (``{{name}}``, ``{{{name}}}``, ``{{a.b}}``, ``{{.}}``) matches any text, a
section or inverted section matches any text too (what it would render depends on values), a
comment matches nothing, and a placeholder matches any number of messages. Roles must be equal
and in order; a message's content is compared part by part (a string is one text part; text
parts and image URLs are compared, other parts and fields are not). The most recently created
matching version wins, whichever prompt it belongs to (docs/api-notes.md, "Chat prompts").

Cost: nothing is read or compiled for a batch without a candidate record, nor matched for a
project without chat versions. Each version is filed under its first message's role and the
first characters of its first literal text (up to :data:`_PREFIX`), so a record is tried only
against the versions whose first message could be its first message (plus those that begin
with a placeholder).

Freshness: a project's versions are read from the store on its first candidate record (one
read of its versions, claims and labels: ``PromptStore.changes`` from the epoch), then kept up
to date by the registry's own writes on this collector (a create or new version is added, a
delete drops the prompt, a write of unknown outcome drops the project so it is read again),
and on a ClickHouse server by the registry's poll (:meth:`ChatLinks.poll_with`: the same read
the live-id index polls with, so the bound is the same, about one poll interval), with the
10-minute reload as the safety net. Without polling on a server, a project is read again
when its copy is older than ``max_age`` seconds.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from time import monotonic
from typing import Any

from promptrail._mustache import MustacheError, parse_mustache

from ...store.prompts import PromptStore, PromptVersionRow, RegistryChanges

# How many leading literal characters of a version's first message file it in the index.
_PREFIX = 64
# Compiled versions kept over all projects; the least recently used projects are dropped first.
_MAX_PATTERNS = 200_000
# Projects kept (most hold no chat version: an empty entry says so without a read).
_MAX_PROJECTS = 100_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_log = logging.getLogger(__name__)
# Reads what was stored in some projects since a time (``PromptStore.changes``).
ChangeReader = Callable[[list[str], datetime], RegistryChanges]
# A message as compared: its role and its content's (kind, text) items.
_Message = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class _Text:
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
    def compile(cls, template: str) -> _Text:
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
class _Step:
    """A template message: its role and its content's (kind, compiled text) items."""

    role: str
    items: tuple[tuple[str, _Text], ...]

    def match(self, message: _Message, found: list[tuple[str, str]]) -> bool:
        role, items = message
        if role != self.role or len(items) != len(self.items):
            return False
        for (kind, text), (want, pattern) in zip(items, self.items, strict=True):
            if kind != want or not pattern.match(text, found):
                return False
        return True


@dataclass(frozen=True)
class _Version:
    """A chat version compiled: its steps (None: a placeholder) and its order of recency."""

    prompt_id: str
    name: str
    version: int
    order: tuple[float, int, str]
    steps: tuple[_Step | None, ...]
    # How many fixed messages follow each step (so a placeholder leaves them room).
    after: tuple[int, ...]
    fixed: int  # how many messages the version needs at least

    def key(self) -> tuple[str, str] | None:
        """Its index key (first role, leading literal), None when it opens with a placeholder."""
        first = self.steps[0] if self.steps else None
        if first is None:
            return None
        if first.items and first.items[0][0] == "text":
            return first.role, first.items[0][1].prefix[:_PREFIX]
        return first.role, ""

    def match(self, messages: Sequence[_Message]) -> dict[str, str] | None:
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
        self, at: int, messages: Sequence[_Message], index: int, found: list[tuple[str, str]]
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


def compile_version(row: PromptVersionRow) -> _Version | None:
    """Compile a chat version's messages; None for a text version or one that cannot match."""
    if row.type != "chat" or not row.messages:
        return None
    steps: list[_Step | None] = []
    try:
        for message in row.messages:
            if message.get("type") == "placeholder":
                steps.append(None)
                continue
            items = _content(message.get("content"))
            if items is None:
                return None
            steps.append(
                _Step(str(message.get("role")), tuple((k, _Text.compile(t)) for k, t in items))
            )
    except MustacheError:
        return None  # stored versions parse (checked at write); nothing to link to if not
    after = [sum(step is not None for step in steps[i + 1 :]) for i in range(len(steps))]
    created = row.created_at.timestamp()
    return _Version(
        prompt_id=row.prompt_id,
        name=row.name,
        version=row.version,
        order=(created, row.version, row.prompt_id),
        steps=tuple(steps),
        after=tuple(after),
        fixed=sum(step is not None for step in steps),
    )


def _content(content: Any) -> tuple[tuple[str, str], ...] | None:
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


def record_messages(value: Any) -> list[_Message] | None:
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
    messages: list[_Message] = []
    for raw in value:
        if not isinstance(raw, dict):
            return None
        role = raw.get("role")
        if not isinstance(role, str):
            return None
        content = raw.get("content")
        if content is None and "parts" in raw:
            content = raw["parts"]
        items = _content(content)
        if items is None:
            return None
        messages.append((role, items))
    return messages


@dataclass(frozen=True)
class _Index:
    """One project's compiled versions, filed for lookup (replaced whole on each change, so a
    reader needs no lock)."""

    buckets: dict[tuple[str, str], list[_Version]]
    lengths: tuple[int, ...]
    loose: list[_Version]  # versions that open with a placeholder

    @classmethod
    def of(cls, versions: Sequence[_Version]) -> _Index:
        buckets: defaultdict[tuple[str, str], list[_Version]] = defaultdict(list)
        loose: list[_Version] = []
        for version in sorted(versions, key=lambda v: v.order, reverse=True):
            key = version.key()
            if key is None:
                loose.append(version)
            else:
                buckets[key].append(version)
        lengths = tuple(sorted({len(prefix) for _, prefix in buckets}))
        return cls(dict(buckets), lengths, loose)

    def find(self, messages: list[_Message]) -> tuple[_Version, dict[str, str]] | None:
        """The newest version the messages match, with its variables' text."""
        role, items = messages[0]
        text = items[0][1] if items and items[0][0] == "text" else ""
        best: tuple[_Version, dict[str, str]] | None = None
        lists = [self.loose] if self.loose else []
        for length in self.lengths:
            if length > len(text):
                break
            bucket = self.buckets.get((role, text[:length]))
            if bucket:
                lists.append(bucket)
        for candidates in lists:
            for version in candidates:  # newest first: the first match is the list's best
                if best is not None and version.order <= best[0].order:
                    break
                if version.fixed > len(messages):
                    continue
                values = version.match(messages)
                if values is not None:
                    best = version, values
                    break
        return best


_EMPTY = _Index({}, (), [])


@dataclass
class _Project:
    """One project's chat versions (by prompt id and number) and its prompts deleted since."""

    versions: dict[tuple[str, int], _Version] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    index: _Index = _EMPTY
    polled_at: datetime = _EPOCH
    loaded_at: float = 0.0
    stale: bool = False  # a write of unknown outcome came during its load: read it again

    def add(self, rows: Sequence[PromptVersionRow]) -> None:
        changed = False
        for row in rows:
            if row.prompt_id in self.deleted or (row.prompt_id, row.version) in self.versions:
                continue
            compiled = compile_version(row)
            if compiled is not None:
                self.versions[(row.prompt_id, row.version)] = compiled
                changed = True
        if changed:
            self.index = _Index.of(list(self.versions.values()))

    def drop(self, prompt_ids: Sequence[str]) -> None:
        self.deleted.update(prompt_ids)
        gone = [key for key in self.versions if key[0] in self.deleted]
        for key in gone:
            del self.versions[key]
        if gone:
            self.index = _Index.of(list(self.versions.values()))


class ChatLinks:
    """The chat versions of each project, compiled to link the records that name no prompt."""

    def __init__(
        self,
        store: PromptStore,
        max_age: float | None = None,
        max_patterns: int = _MAX_PATTERNS,
    ) -> None:
        """Read versions from ``store``; ``max_age`` (seconds): read a project again when its
        copy is older (a server without polling; None: never, its writes and polls keep it)."""
        self._store = store
        self._max_age = max_age
        self._max_patterns = max_patterns
        self._projects: OrderedDict[str, _Project] = OrderedDict()
        self._total = 0  # compiled versions held over all projects
        self._lock = threading.Lock()
        self._load_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        # Changes applied while a project loads, replayed on what the load read.
        self._recording: dict[str, list[Callable[[_Project], None]]] = {}

    # -- linking ----------------------------------------------------------------------------

    def link(self, project: str, rows: Sequence[dict[str, Any]]) -> int:
        """Link each stored-values row (``ingest.record_values``) that names no prompt and
        whose input matches a chat version of the project; return how many were linked.

        A linked row takes the version's prompt name and number and ``metadata.prompt_link =
        "matched"``, and, when it has none, ``input_variables`` from the text each plain
        variable stood for."""
        candidates = [
            row for row in rows if not row["prompt_name"] and type(row["input"]) in (list, dict)
        ]
        if not candidates:
            return 0
        try:
            index = self._project(project).index
        except Exception:
            # Linking is a convenience: a store that cannot answer now must not cost the
            # records, which are stored unlinked (the next batch tries the read again).
            _log.warning(
                "chat versions of project %s unreadable; its records are stored unlinked",
                project,
                exc_info=True,
            )
            return 0
        if not index.buckets and not index.loose:
            return 0
        linked = 0
        for row in candidates:
            messages = record_messages(row["input"])
            if messages is None:
                continue
            found = index.find(messages)
            if found is None:
                continue
            version, values = found
            row["prompt_name"] = version.name
            row["version"] = version.version
            row["metadata"] = {**(row["metadata"] or {}), "prompt_link": "matched"}
            if not row["input_variables"]:
                row["input_variables"] = values
            linked += 1
        return linked

    def _project(self, project: str) -> _Project:
        with self._lock:
            held = self._projects.get(project)
            if held is not None and not self._expired(held):
                self._projects.move_to_end(project)
                return held
        with self._load_locks[project]:
            with self._lock:
                held = self._projects.get(project)
                if held is not None and not self._expired(held):
                    return held
                self._recording[project] = []
            try:
                loaded = self._read(project)
            except BaseException:
                with self._lock:
                    del self._recording[project]
                raise
            with self._lock:
                for change in self._recording.pop(project):
                    change(loaded)
                replaced = self._projects.pop(project, None)
                self._total -= len(replaced.versions) if replaced is not None else 0
                self._projects[project] = loaded
                self._total += len(loaded.versions)
                self._evict()
            return loaded

    def _expired(self, held: _Project) -> bool:
        if held.stale:
            return True
        return self._max_age is not None and monotonic() - held.loaded_at > self._max_age

    def _read(self, project: str) -> _Project:
        """Read the project's versions and deleted prompts from the store."""
        started = datetime.now(UTC)
        loaded = _Project(polled_at=started, loaded_at=monotonic())
        found = self._store.changes([project], _EPOCH)
        loaded.drop([prompt_id for _, _, _, prompt_id, gone in found.claims if gone])
        loaded.add([row for _, row in found.versions])
        return loaded

    # -- what the registry's writes and polls tell it ----------------------------------------

    def stored(self, project: str, row: PromptVersionRow) -> None:
        """A version (or a create's version 1) this collector stored."""
        self._apply(project, lambda held: held.add([row]))

    def deleted(self, project: str, prompt_id: str) -> None:
        """A prompt this collector deleted."""
        self._apply(project, lambda held: held.drop([prompt_id]))

    def forget(self, project: str) -> None:
        """Drop the project's copy (a write of unknown outcome): its next use reads it again."""
        with self._lock:
            dropped = self._projects.pop(project, None)
            self._total -= len(dropped.versions) if dropped is not None else 0
            if project in self._recording:
                # The load under way may have missed that write: its copy serves this use
                # only, and the next reads the store again.
                self._recording[project].append(lambda held: setattr(held, "stale", True))

    def reload(self) -> None:
        """Drop every project's copy (the registry's periodic reload on a server)."""
        with self._lock:
            self._projects.clear()
            self._total = 0

    def poll_with(
        self, read: ChangeReader, projects: Sequence[str], since: datetime, overlap: timedelta
    ) -> RegistryChanges:
        """Read what was stored in ``projects`` and in this object's projects (from ``overlap``
        before their last poll), apply it here and return it for the live-id index's poll."""
        started = datetime.now(UTC)
        with self._lock:
            mine = dict(self._projects)
        oldest = min((held.polled_at for held in mine.values()), default=since + overlap)
        names = sorted(set(projects) | set(mine))
        found = read(names, min(since, oldest - overlap))
        gone: defaultdict[str, list[str]] = defaultdict(list)
        for project, _, _, prompt_id, deleted in found.claims:
            if deleted:
                gone[project].append(prompt_id)
        rows: defaultdict[str, list[PromptVersionRow]] = defaultdict(list)
        for project, row in found.versions:
            rows[project].append(row)
        with self._lock:
            for project, held in mine.items():
                if self._projects.get(project) is not held:
                    continue  # dropped meanwhile: its next use reads the store
                before = len(held.versions)
                held.drop(gone.get(project, []))
                held.add(rows.get(project, []))
                held.polled_at = started
                self._total += len(held.versions) - before
            self._evict()
        return found

    def poll(self, read: ChangeReader, overlap: timedelta) -> None:
        """Apply what was stored in this object's projects since their last poll."""
        with self._lock:
            if not self._projects:
                return
        self.poll_with(read, [], datetime.now(UTC), overlap)

    def _apply(self, project: str, change: Callable[[_Project], None]) -> None:
        with self._lock:
            recording = self._recording.get(project)
            if recording is not None:
                recording.append(change)
            held = self._projects.get(project)
            if held is not None:
                before = len(held.versions)
                change(held)
                self._total += len(held.versions) - before
                self._evict()

    def _evict(self) -> None:
        """Drop the least recently used projects past the limits (holding ``_lock``)."""
        while len(self._projects) > 1 and (
            self._total > self._max_patterns or len(self._projects) > _MAX_PROJECTS
        ):
            _, dropped = self._projects.popitem(last=False)
            self._total -= len(dropped.versions)
