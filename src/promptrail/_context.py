"""What an observed function passes down to the model calls made inside it.

``@observe(prompt_name=..., metadata=...)`` and rendered templates set it; the provider
patches read it, so each captured call is logged against the right prompt, version and
metadata without the user threading them through.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import _genai


@dataclass(frozen=True)
class Linkage:
    """The prompt version and variables a piece of text was rendered from."""

    prompt_name: str
    version: int | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)


class Observation:
    """Inherited by nested observations and model calls (never mutated once made)."""

    __slots__ = ("_metadata_json", "metadata", "prompt_name", "version")

    def __init__(
        self,
        prompt_name: str | None = None,
        version: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.prompt_name = prompt_name
        self.version = version
        self.metadata: Mapping[str, Any] = metadata or {}
        self._metadata_json: str | None = None

    @property
    def metadata_json(self) -> str:
        """The metadata as span-attribute JSON ("" when there is none), serialised once.

        Every span made under this observation carries the same text, so it is computed on
        first use and kept (a race only computes the same string twice).
        """
        text = self._metadata_json
        if text is None:
            text = to_json(self.metadata) if self.metadata else ""
            self._metadata_json = text
        return text


OUTSIDE = Observation()
"""The observation in force outside every observed function."""

_current: contextvars.ContextVar[Observation] = contextvars.ContextVar(
    "promptrail_observation",
    default=OUTSIDE,  # never mutated
)


def current() -> Observation:
    """Return the observation context in force."""
    return _current.get()


class _HasLinkage(Protocol):
    @property
    def prompt_name(self) -> str | None: ...
    @property
    def prompt_version(self) -> int | None: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


def nested(outer: Observation, options: _HasLinkage) -> Observation:
    """Return the observation inside ``outer``: prompt linkage overrides, metadata merges."""
    if not options.prompt_name and not options.metadata:
        # Nothing to override or merge: share ``outer`` (and its serialised metadata).
        return outer
    return Observation(
        options.prompt_name or outer.prompt_name,
        options.prompt_version if options.prompt_name else outer.version,
        {**outer.metadata, **options.metadata},
    )


def set_current(observation: Observation) -> contextvars.Token[Observation]:
    """Make ``observation`` current; reset with :func:`reset_current`."""
    return _current.set(observation)


def reset_current(token: contextvars.Token[Observation]) -> None:
    """Undo :func:`set_current`."""
    _current.reset(token)


class _RenderedTexts:
    """Remember recently rendered template texts, to link the call that sends one."""

    def __init__(self, size: int = 1024) -> None:
        self._items: OrderedDict[str, Linkage] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def remember(self, text: str, linkage: Linkage) -> None:
        with self._lock:
            self._items[text] = linkage
            self._items.move_to_end(text)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def find(self, texts: Callable[[], list[str]]) -> Linkage | None:
        """The linkage of the first of ``texts()`` that was rendered, if any.

        ``texts`` is only called when something has been rendered: without templates (the
        common case) a model call pays neither for collecting its texts nor for the lock.
        """
        if not self._items:
            return None
        candidates = texts()
        with self._lock:
            for text in candidates:
                found = self._items.get(text)
                if found is not None:
                    return found
        return None


rendered = _RenderedTexts()


def remember_rendering(
    text: str, prompt_name: str, version: int | None, variables: Mapping[str, Any]
) -> None:
    """Record that ``text`` was rendered from a prompt version (called by templates)."""
    rendered.remember(text, Linkage(prompt_name, version, dict(variables)))


def call_attributes(message_texts: Callable[[], list[str]]) -> dict[str, Any]:
    """Span attributes linking a model call to its prompt version, variables and metadata.

    ``message_texts`` returns the texts the call sends (see :meth:`_RenderedTexts.find`).
    """
    observation = _current.get()
    attributes: dict[str, Any] = {}
    linkage = rendered.find(message_texts)
    prompt_name = linkage.prompt_name if linkage else observation.prompt_name
    version = linkage.version if linkage else observation.version
    if prompt_name:
        attributes[_genai.PROMPT_NAME] = prompt_name
    if version:
        attributes[_genai.PROMPT_VERSION] = version
    if linkage and linkage.variables:
        attributes[_genai.INPUT_VARIABLES] = to_json(linkage.variables)
    if observation.metadata:
        attributes[_genai.METADATA] = observation.metadata_json
    return attributes


MAX_ATTRIBUTE_CHARS = 100_000


# json.dumps builds a new encoder on every call that passes options; one shared encoder
# (stateless between calls, so thread-safe) gives the same text without that cost.
_encode = json.JSONEncoder(default=repr, ensure_ascii=False).encode


def to_json(value: Any) -> str:
    """JSON for a span attribute; anything not JSON-able is shown by its repr, long text cut."""
    text = _encode(value)
    if len(text) > MAX_ATTRIBUTE_CHARS:
        return _encode(text[:MAX_ATTRIBUTE_CHARS] + "…[truncated]")
    return text
