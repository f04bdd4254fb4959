"""What an observed function or a ``promptrail.context`` passes down to the calls inside it.

``@observe(prompt_name=..., metadata=...)``, ``promptrail.context(user_id=..., ...)`` and
rendered templates set it; the provider patches read it, so each captured call is logged
against the right prompt, version, user, session and metadata without the user threading
them through.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from . import _genai


@dataclass(frozen=True)
class Linkage:
    """The prompt version and variables a piece of text was rendered from."""

    prompt_name: str
    version: int | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)


class Observation:
    """Inherited by nested observations and model calls (never mutated once made)."""

    __slots__ = ("_call_attributes", "_metadata_json", "metadata", "prompt_name", "version")

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
        self._call_attributes: dict[str, Any] | None = None

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

    def call_attributes(self) -> dict[str, Any]:
        """The attributes of a model call made here that no rendered template links (shared:
        copy before changing it), worked out once per observation."""
        attributes = self._call_attributes
        if attributes is None:
            attributes = {}
            if self.prompt_name:
                attributes[_genai.PROMPT_NAME] = self.prompt_name
            if self.version:
                attributes[_genai.PROMPT_VERSION] = self.version
            if self.metadata:
                attributes[_genai.METADATA] = self.metadata_json
            self._call_attributes = attributes
        return attributes


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


def with_metadata(outer: Observation, metadata: Mapping[str, Any]) -> Observation:
    """Return the observation inside ``outer`` with ``metadata`` merged in (its keys win)."""
    if not metadata:
        return outer
    return Observation(outer.prompt_name, outer.version, {**outer.metadata, **metadata})


def set_current(observation: Observation) -> contextvars.Token[Observation]:
    """Make ``observation`` current; reset with :func:`reset_current`."""
    return _current.set(observation)


def reset_current(token: contextvars.Token[Observation]) -> None:
    """Undo :func:`set_current`."""
    _current.reset(token)


class FrameworkCall:
    """A model call a framework integration records itself (a LangChain LLM run, for one).

    While one is open in the context, the provider patches leave the calls made inside it
    unrecorded, so each provider call is recorded once. ``open`` turns False when the
    framework's call ends; a value left behind in a context (a stream abandoned and
    collected elsewhere) is then inert.
    """

    __slots__ = ("open", "previous")

    def __init__(self) -> None:
        self.open = True
        self.previous: FrameworkCall | None = None

    def enter(self) -> None:
        """Make this call the one the provider patches defer to, in the current context."""
        self.previous = _framework_call.get()
        _framework_call.set(self)

    def close(self) -> None:
        """End the call; in the context it was entered in, restore the one before it."""
        self.open = False
        if _framework_call.get() is self:
            _framework_call.set(self.previous)


_framework_call: contextvars.ContextVar[FrameworkCall | None] = contextvars.ContextVar(
    "promptrail_framework_call", default=None
)


framework_call = _framework_call.get
"""The framework call open in this context, if any (the model-call wrappers' check)."""


def in_framework_call() -> bool:
    """Whether a framework integration is recording the model call being made here."""
    call = _framework_call.get()
    return call is not None and call.open


P = ParamSpec("P")
R = TypeVar("R")


class Context:
    """The user, session and metadata of a block of work; see :func:`context`."""

    __slots__ = ("_tokens", "metadata")

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self.metadata: Mapping[str, Any] = metadata
        # A stack, so one Context can be re-entered in nested blocks of the same thread.
        self._tokens: list[contextvars.Token[Observation]] = []

    def _enter(self) -> contextvars.Token[Observation]:
        return _current.set(with_metadata(_current.get(), self.metadata))

    def __enter__(self) -> Context:
        self._tokens.append(self._enter())
        return self

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._tokens.pop())

    async def __aenter__(self) -> Context:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.__exit__()

    def __call__(self, function: Callable[P, R]) -> Callable[P, R]:
        """Decorate a function or coroutine function: each call runs in this context."""
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            # A generator runs its steps in its consumer's context: a context set around it
            # would either leak into the consumer or be gone before the first step.
            raise TypeError(
                "promptrail.context cannot decorate a generator function; "
                "use `with promptrail.context(...)` inside it instead"
            )
        enter = self._enter
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_coroutine(*args: P.args, **kwargs: P.kwargs) -> Any:
                token = enter()  # a local token: concurrent calls never share one
                try:
                    return await function(*args, **kwargs)
                finally:
                    _current.reset(token)

            return cast("Callable[P, R]", run_coroutine)

        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            token = enter()
            try:
                return function(*args, **kwargs)
            finally:
                _current.reset(token)

        return run


def context(
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Context:
    """Attach a user, a session and metadata to every record captured inside.

    A context manager (``with`` and ``async with``) and a decorator of functions and
    coroutine functions. ``user_id`` and ``session_id`` become the metadata keys of the same
    names (``GET /v1/requests?metadata.user_id=u1`` finds the records); they win over those
    keys in ``metadata``. Contexts nest: metadata merges, the innermost value wins, and
    ``@observe(metadata=...)`` inside merges the same way. Built on :mod:`contextvars`:
    asyncio tasks and threads run in a copied context (``asyncio.to_thread``,
    ``contextvars.copy_context().run``) inherit it; other threads do not.

    >>> with promptrail.context(user_id="u1", session_id="s9", metadata={"plan": "pro"}):
    ...     client.chat.completions.create(...)  # recorded with all three keys
    """
    merged = dict(metadata or {})
    if user_id is not None:
        merged["user_id"] = user_id
    if session_id is not None:
        merged["session_id"] = session_id
    return Context(merged)


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
    # Without templates rendered (the common case) no linkage is looked for: not even a call.
    linkage = rendered.find(message_texts) if rendered._items else None
    if linkage is None:
        if observation is OUTSIDE:
            return {}
        attributes = observation.call_attributes()
        return attributes.copy() if attributes else {}
    linked: dict[str, Any] = {}
    if linkage.prompt_name:
        linked[_genai.PROMPT_NAME] = linkage.prompt_name
    if linkage.version:
        linked[_genai.PROMPT_VERSION] = linkage.version
    if linkage.variables:
        linked[_genai.INPUT_VARIABLES] = to_json(linkage.variables)
    if observation.metadata:
        linked[_genai.METADATA] = observation.metadata_json
    return linked


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
