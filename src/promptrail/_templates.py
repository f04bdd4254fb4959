"""Templates for local execution: the cached fetch and the ``{{var}}`` renderer.

A template is fetched once per (prompt, label or version) and kept for a TTL. When a refresh
fails because the collector is unreachable or answers 5xx, the last good copy is served (with
a warning) so an outage of the collector never takes the application down with it; with no
copy to serve, the error is raised.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict

from ._call import Call, prompt_path, unwrapped
from ._context import remember_rendering
from ._errors import APIConnectionError, MissingVariablesError, PromptrailError
from ._types import TemplatePayload

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


class PromptTemplate(TemplatePayload):
    """Hold a fetched template (the template payload's fields) and render it locally.

    >>> tpl = client.prompts.template("greet", label="production")
    >>> tpl.render(name="Ada")
    'Say hello to Ada.'
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    @property
    def variable_names(self) -> list[str]:
        """Return the template's variable names in order of first use."""
        return list(dict.fromkeys(n for n in _VARIABLE.findall(self.content) if n.isidentifier()))

    def render(self, variables: Mapping[str, Any] | None = None, /, **values: Any) -> str:
        """Fill every ``{{var}}`` and return the text.

        Give values as a mapping, as keywords, or both. Non-string values render as JSON.
        Raise :class:`promptrail.MissingVariablesError` naming (sorted) every variable left
        undefined; extra values are ignored.
        """
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
    ) -> list[dict[str, str]]:
        """Return chat messages the way a run on the collector builds them.

        If the template uses ``{{user_input}}``, ``user_input`` fills it and the rendered text
        is the one user message; otherwise a given ``user_input`` follows as a user message
        and the rendered template becomes the system message.
        """
        merged = {**(variables or {}), **values}
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


def template_call(key: TemplateKey) -> Call[PromptTemplate]:
    """Return the call fetching a template by latest version, number or label."""
    name, label, version = key
    if label is not None:
        path = prompt_path(name, "versions", "by-label", label, "template")
    elif version is not None:
        path = prompt_path(name, "versions", version, "template")
    else:
        path = prompt_path(name, "template")
    return Call("GET", path, unwrapped(PromptTemplate))


@dataclass
class _Entry:
    template: PromptTemplate
    fresh_until: float


class TemplateCache:
    """Keep fetched templates for a TTL; thread-safe.

    An expired copy is still served at once while one background refresh replaces it
    (stale-while-revalidate), so only the very first fetch of a template waits on the network.
    """

    def __init__(self, ttl: float = DEFAULT_TEMPLATE_TTL) -> None:
        self.ttl = _checked_ttl(ttl)
        self._entries: dict[TemplateKey, _Entry] = {}
        self._refreshing: set[TemplateKey] = set()
        self._lock = threading.Lock()

    def stale(self, key: TemplateKey) -> PromptTemplate | None:
        """Return the cached template even if it has expired."""
        with self._lock:
            entry = self._entries.get(key)
        return entry.template if entry is not None else None

    def claim_refresh(self, key: TemplateKey) -> bool:
        """Return True for the one caller that should refresh ``key`` now."""
        with self._lock:
            if key in self._refreshing:
                return False
            self._refreshing.add(key)
            return True

    def release_refresh(self, key: TemplateKey) -> None:
        """Mark the refresh of ``key`` finished."""
        with self._lock:
            self._refreshing.discard(key)

    def refreshed(
        self, key: TemplateKey, outcome: PromptTemplate | PromptrailError, ttl: float | None
    ) -> None:
        """Record a background refresh: a new copy, or a failure (the old copy stays)."""
        try:
            if isinstance(outcome, PromptTemplate):
                self.store(key, outcome, ttl)
            else:
                try:
                    self.serve_stale(key, outcome, ttl)
                except PromptrailError:
                    logger.warning("promptrail: refreshing template %r failed: %s", key[0], outcome)
        finally:
            self.release_refresh(key)

    def fresh(self, key: TemplateKey) -> PromptTemplate | None:
        """Return the cached template if it has not expired."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and time.monotonic() < entry.fresh_until:
            return entry.template
        return None

    def store(self, key: TemplateKey, template: PromptTemplate, ttl: float | None) -> None:
        """Keep a freshly fetched template."""
        fresh_until = time.monotonic() + self._ttl(ttl)
        with self._lock:
            self._entries[key] = _Entry(template, fresh_until)

    def serve_stale(
        self, key: TemplateKey, error: PromptrailError, ttl: float | None
    ) -> PromptTemplate:
        """Return the last good copy after a failed refresh, or raise ``error``.

        Only an unreachable or failing collector (connection error, 5xx) falls back; a 404 or
        401 is an answer, and is raised. The copy is then trusted for another TTL, so an outage
        costs one failed fetch per TTL rather than one per call.
        """
        if not _is_outage(error):
            raise error
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                raise error
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

    def invalidate(self, name: str) -> None:
        """Forget every cached template of a prompt (after this client changed it)."""
        with self._lock:
            for key in [k for k in self._entries if k[0] == name]:
                del self._entries[key]

    def clear(self) -> None:
        """Forget every cached template."""
        with self._lock:
            self._entries.clear()

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


def _is_outage(error: PromptrailError) -> bool:
    return isinstance(error, APIConnectionError) or (error.status or 0) >= 500
