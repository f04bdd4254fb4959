"""Templates for local execution: the cached fetch, the ``{{var}}`` renderer, chat templates.

A template is fetched once per (prompt, label or version) and kept for a TTL. When a refresh
fails because the collector is unreachable or answers 5xx, the last good copy is served (with
a warning) so an outage of the collector never takes the application down with it. The last
good copy of each template is also kept on disk (:class:`TemplateDisk`, under the SDK's cache
directory: docs/sdk.md, "Outages"), so a process that starts while the collector is unreachable
serves it, marked ``stale=True``; with no copy to serve, the error is raised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from ._api_call import Call, prompt_path, unwrapped
from ._chat_templates import Placeholders, compile_messages
from ._chat_templates import anthropic_kwargs as chat_anthropic_kwargs
from ._chat_templates import openai_kwargs as chat_openai_kwargs
from ._context import remember_rendering
from ._disk import private_dir, resolve_cache_dir, say_unusable, scope_of, write_whole
from ._errors import APIConnectionError, MissingVariablesError, PromptrailError, TemplateError
from ._types import _TemplateFields

logger = logging.getLogger("promptrail")

DEFAULT_TEMPLATE_TTL = 60.0
USER_INPUT = "user_input"

# The payload writes variables as {{name}} (identifier names, Unicode letters included); single
# braces are literal text.
_VARIABLE = re.compile(r"\{\{([^{}\s]+)\}\}")


def variable_text(value: Any) -> str:
    """Return the text a variable renders as: strings as they are, anything else as JSON.

    The collector renders run variables the same way, so a local render matches a run.
    """
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class PromptTemplate(_TemplateFields):
    """Hold a fetched template (the template payload's fields) and render it locally.

    A text prompt's ``content`` renders with :meth:`render`; a chat prompt's messages
    (``message_templates``, the payload's ``messages``) compile with :meth:`compile`,
    :meth:`openai_kwargs` and :meth:`anthropic_kwargs`.

    >>> tpl = client.prompts.template("greet", label="production")
    >>> tpl.render(name="Ada")
    'Say hello to Ada.'
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    # A chat prompt's unrendered messages (the payload's ``messages``: that name is the
    # method building a call's messages, older than chat prompts).
    message_templates: list[dict[str, Any]] | None = Field(default=None, alias="messages")

    # True only on a copy read back from disk because the collector could not be reached when
    # the process first asked for it (docs/sdk.md, "Outages"); every fetched template has it.
    stale: bool = False

    @property
    def is_chat(self) -> bool:
        """True for a chat prompt's template (compile it; ``content`` is None)."""
        return self.type == "chat"

    @property
    def variable_names(self) -> list[str]:
        """Return the template's variable names in order of first use."""
        if self.content is None:
            return list(self.variables)
        return list(dict.fromkeys(n for n in _VARIABLE.findall(self.content) if n.isidentifier()))

    def compile(
        self, placeholders: Placeholders | None = None, **variables: Any
    ) -> list[dict[str, Any]]:
        """Return a chat prompt's messages rendered with ``variables``.

        ``placeholders`` fills each placeholder with a list of messages (a conversation's
        history). Raise :class:`promptrail.TemplateError` naming (sorted) every variable and
        placeholder left unfilled, or the first value of the wrong type (``variables.<name>``).
        A text prompt compiles to the one user message :meth:`messages` builds.

        >>> tpl.compile({"history": []}, city="Paris")
        [{'role': 'system', 'content': 'You answer about Paris.'}]
        """
        if not self.is_chat:
            if placeholders:
                raise TemplateError(
                    "placeholders: a text prompt has none",
                    code="VALIDATION_ERROR",
                    field="placeholders",
                )
            return self.messages(variables)
        return compile_messages(self, placeholders, variables)

    def openai_kwargs(
        self, placeholders: Placeholders | None = None, **variables: Any
    ) -> dict[str, Any]:
        """Return the arguments of OpenAI's ``chat.completions.create(**...)``: ``model``,
        the compiled ``messages``, the version's ``tools``, ``tool_choice``,
        ``response_format`` (each when set) and its ``temperature`` and ``max_tokens``."""
        return chat_openai_kwargs(self, self.compile(placeholders, **variables))

    def anthropic_kwargs(
        self, placeholders: Placeholders | None = None, **variables: Any
    ) -> dict[str, Any]:
        """Return the arguments of Anthropic's ``messages.create(**...)``: ``model``,
        ``system`` (the system and developer messages), ``messages``, ``tools`` (with
        ``input_schema``), ``tool_choice``, ``max_tokens`` (1024 unless the version sets
        it) and the temperature in ``extra_body``; a JSON-schema ``response_format`` becomes
        a forced tool (docs/sdk.md, "Chat templates")."""
        return chat_anthropic_kwargs(self, self.compile(placeholders, **variables), variables)

    def render(self, variables: Mapping[str, Any] | None = None, /, **values: Any) -> str:
        """Fill every ``{{var}}`` and return the text.

        Give values as a mapping, as keywords, or both. Non-string values render as JSON.
        Raise :class:`promptrail.MissingVariablesError` naming (sorted) every variable left
        undefined; extra values are ignored.
        """
        if self.content is None:
            raise TypeError(f"{self.prompt_name!r} is a chat prompt: compile() its messages")
        merged = {**(variables or {}), **values}
        missing = sorted({name for name in self.variable_names if name not in merged})
        if missing:
            raise MissingVariablesError(missing, self.content)
        text = _VARIABLE.sub(
            lambda match: (
                variable_text(merged[match.group(1)])
                if match.group(1).isidentifier()
                else match.group(0)
            ),
            self.content,
        )
        # A captured model call that sends this exact text is logged against this version.
        remember_rendering(text, self.prompt_name, self.version, merged)
        return text

    def messages(
        self,
        variables: Mapping[str, Any] | None = None,
        /,
        *,
        user_input: str | None = None,
        **values: Any,
    ) -> list[dict[str, Any]]:
        """Return chat messages the way a run on the collector builds them.

        If the template uses ``{{user_input}}``, ``user_input`` fills it and the rendered text
        is the one user message; otherwise a given ``user_input`` follows as a user message
        and the rendered template becomes the system message. A chat prompt's messages are
        compiled (see :meth:`compile`; it has no placeholders to fill here) and a given
        ``user_input`` is appended as a last user message.
        """
        merged = {**(variables or {}), **values}
        if self.is_chat:
            compiled = compile_messages(self, None, merged)
            if user_input is not None:
                compiled.append({"role": "user", "content": user_input})
            return compiled
        fills_template = USER_INPUT in self.variable_names
        if fills_template and user_input is not None:
            merged[USER_INPUT] = user_input
        rendered = self.render(merged)
        if user_input is not None and not fills_template:
            return [
                {"role": "system", "content": rendered},
                {"role": "user", "content": user_input},
            ]
        return [{"role": "user", "content": rendered}]


TemplateKey = tuple[str, str | None, int | None]


def template_key(name: str, label: str | None, version: int | None) -> TemplateKey:
    """Return the cache key of a template fetch (refusing a label and a version at once)."""
    if label is not None and version is not None:
        raise ValueError("give a label or a version, not both")
    return (name, label, version)


def addressed_path(key: TemplateKey, action: str) -> str:
    """Return the path of ``action`` (``template``, ``run``) on the version ``key`` names.

    A label, a version number, or neither for the newest version.
    """
    name, label, version = template_key(*key)
    if label is not None:
        return prompt_path(name, "versions", "by-label", label, action)
    if version is not None:
        return prompt_path(name, "versions", version, action)
    return prompt_path(name, action)


def template_call(key: TemplateKey) -> Call[PromptTemplate]:
    """Return the call fetching a template by latest version, number or label."""
    return Call("GET", addressed_path(key, "template"), unwrapped(PromptTemplate))


_DISK_MAGIC = b"PRT1"


class TemplateDisk:
    """The last good copy of each fetched template, one file per (prompt, label or version).

    Under ``<cache dir>/templates/<scope>/`` (one collector URL and API key; the key itself is
    not on disk), each file written whole by rename with a CRC-32 of its JSON: a torn or
    corrupt copy is ignored (as if there were none), never served.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def open(cls, base_url: str, api_key: str) -> TemplateDisk | None:
        """The copies of this collector and key, or None (disk cache off, or unusable: said
        once)."""
        cache_dir = resolve_cache_dir()
        if cache_dir is None:
            return None
        try:
            private_dir(cache_dir)
            return cls(private_dir(cache_dir / "templates" / scope_of(base_url, api_key)))
        except OSError as exc:
            say_unusable(cache_dir, exc, "templates", "they are cached in memory only")
            return None

    def _path(self, key: TemplateKey) -> Path:
        name = hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def save(self, key: TemplateKey, template: PromptTemplate) -> None:
        """Keep ``template`` as the last good copy of ``key`` (a failed write only logs)."""
        payload = template.model_dump_json(exclude={"stale"}, by_alias=True).encode()
        header = _DISK_MAGIC + b" %d\n" % zlib.crc32(payload)
        try:
            write_whole(self._path(key), header + payload)
        except OSError as exc:
            logger.debug("promptrail: template %r not kept on disk: %s", key[0], exc)

    def load(self, key: TemplateKey) -> PromptTemplate | None:
        """The last good copy of ``key``, marked ``stale``; None if none is whole."""
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        header, _, payload = data.partition(b"\n")
        magic, _, crc = header.partition(b" ")
        if magic != _DISK_MAGIC or not crc.isdigit() or int(crc) != zlib.crc32(payload):
            return None
        try:
            template = PromptTemplate.model_validate_json(payload)
        except ValueError:
            return None
        return template.model_copy(update={"stale": True})


@dataclass
class _Entry:
    template: PromptTemplate
    fresh_until: float


@dataclass(frozen=True)
class Cached:
    """A copy to serve at once, and whether this caller should refresh it in the background."""

    template: PromptTemplate
    refresh: bool


class TemplateCache:
    """Keep fetched templates for a TTL and make every decision of ``prompts.template()``.

    Thread-safe and sans I/O, as httpx's ``BaseClient`` is for its two clients: the sync and
    async ``template()`` only send the requests it asks for, so they cannot drift apart.

    - :meth:`lookup`: a fresh copy is served; an expired one too, while one caller (told by
      ``refresh``) fetches the new one in the background (stale-while-revalidate), so only
      the very first fetch of a template waits on the network; nothing cached means fetch now.
    - :meth:`fetched`: the answer of that fetch, or after a failure the copy or fallback to serve.
    - :meth:`refreshed`: the answer of a background refresh.
    """

    def __init__(self, ttl: float = DEFAULT_TEMPLATE_TTL, disk: TemplateDisk | None = None) -> None:
        self.ttl = _checked_ttl(ttl)
        self._disk = disk
        self._entries: dict[TemplateKey, _Entry] = {}
        self._refreshing: set[TemplateKey] = set()
        self._lock = threading.Lock()

    def lookup(self, key: TemplateKey) -> Cached | None:
        """Return the copy to serve without waiting, or None: fetch it now."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if now < entry.fresh_until:
                return Cached(entry.template, refresh=False)
            refresh = key not in self._refreshing
            self._refreshing.add(key)
        return Cached(entry.template, refresh)

    def fetched(
        self,
        key: TemplateKey,
        outcome: PromptTemplate | PromptrailError,
        ttl: float | None,
        fallback: str | PromptTemplate | None,
    ) -> PromptTemplate:
        """Keep and return a fetched template; after a failed fetch, return what to serve.

        A copy another caller fetched meanwhile beats the ``fallback``, which is only for a
        template never fetched; the error is raised when neither may be served.
        """
        if isinstance(outcome, PromptTemplate):
            self._store(key, outcome, ttl)
            return outcome
        if self._copy(key) is None and _is_outage(outcome):
            self._from_disk(key)  # a cold start: the last good copy beats a fallback
        if fallback is not None and self._copy(key) is None:
            return fallback_template(key[0], fallback)
        served = self._last_good(key, outcome, ttl)
        if served is None:
            raise outcome
        return served

    def refreshed(
        self, key: TemplateKey, outcome: PromptTemplate | Exception, ttl: float | None
    ) -> None:
        """Record a background refresh: a new copy, or a failure (the old copy stays)."""
        try:
            if isinstance(outcome, PromptTemplate):
                self._store(key, outcome, ttl)
            elif self._last_good(key, outcome, ttl) is None:
                # Not an outage (a 404, or the client was closed meanwhile), and nobody to
                # raise to: the next call asks again.
                logger.warning("promptrail: refreshing template %r failed: %s", key[0], outcome)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def invalidate(self, name: str) -> None:
        """Forget every cached template of a prompt (after this client changed it)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == name]:
                del self._entries[key]

    def clear(self) -> None:
        """Forget every cached template."""
        with self._lock:
            self._entries.clear()

    def _copy(self, key: TemplateKey) -> PromptTemplate | None:
        with self._lock:
            entry = self._entries.get(key)
        return entry.template if entry is not None else None

    def _store(self, key: TemplateKey, template: PromptTemplate, ttl: float | None) -> None:
        fresh_until = time.monotonic() + self._ttl(ttl)
        with self._lock:
            previous = self._entries.get(key)
            self._entries[key] = _Entry(template, fresh_until)
        # Written when it changed only: a refresh every TTL that brings the same copy is free.
        if self._disk is not None and (previous is None or previous.template != template):
            self._disk.save(key, template)

    def _from_disk(self, key: TemplateKey) -> None:
        """Load the disk's last good copy of ``key`` (stale) into memory, if there is one."""
        template = self._disk.load(key) if self._disk is not None else None
        if template is None:
            return
        with self._lock:
            # Expired at once: _last_good serves it (with its warning) and decides its TTL.
            self._entries.setdefault(key, _Entry(template, 0.0))

    def _last_good(
        self, key: TemplateKey, error: Exception, ttl: float | None
    ) -> PromptTemplate | None:
        """Return the last good copy to serve despite ``error``, or None if none may be.

        Only an unreachable or failing collector (connection error, 5xx) falls back; a 404 or
        401 is an answer. The copy is then trusted for another TTL, so an outage costs one
        failed fetch per TTL rather than one per call.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not _is_outage(error):
                return None
            entry.fresh_until = time.monotonic() + self._ttl(ttl)
        name, label, version = key
        logger.warning(
            "promptrail: serving the cached template of %r (label=%s, version=%s, fetched "
            "version %s) because the refresh failed: %s",
            name,
            label,
            version,
            entry.template.version,
            error,
        )
        return entry.template

    def _ttl(self, ttl: float | None) -> float:
        return self.ttl if ttl is None else _checked_ttl(ttl)


def fallback_template(name: str, fallback: str | PromptTemplate) -> PromptTemplate:
    """Return the template to use when nothing could be fetched or cached.

    A string is the template text in ``{{var}}`` form; it renders like a fetched template,
    and calls made with it are logged against the prompt name (version 0: a fallback).
    """
    if isinstance(fallback, PromptTemplate):
        return fallback
    names = list(dict.fromkeys(n for n in _VARIABLE.findall(fallback) if n.isidentifier()))
    return PromptTemplate(
        prompt_id="",
        prompt_name=name,
        version=0,
        version_id="",
        content=fallback,
        variables={n: {"type": "string"} for n in names},
        provider="openai",
        model="",
    )


def _checked_ttl(ttl: float) -> float:
    if ttl < 0:
        raise ValueError("a template TTL must be 0 or more seconds")
    return float(ttl)


def _is_outage(error: Exception) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    return isinstance(error, PromptrailError) and (error.status or 0) >= 500
