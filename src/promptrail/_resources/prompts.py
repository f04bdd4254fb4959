"""``client.prompts``: prompts, versions, labels, cached templates and runs (spec 4.1-4.4).

Each endpoint is described once, by a function returning a :class:`~promptrail._api_call.Call`;
:class:`Prompts` and :class:`AsyncPrompts` only send those calls.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from .._api_call import Call, Page, body_of, data_list_of, data_of, page_of, params, prompt_path
from .._errors import PromptrailError
from .._http import AsyncHTTP, SyncHTTP
from .._prompt_diff import PromptDiff
from .._streaming import AsyncRunStream, RunStream
from .._templates import (
    PromptTemplate,
    TemplateCache,
    TemplateKey,
    addressed_path,
    template_call,
    template_key,
)
from .._types import (
    Label,
    LabelRemoved,
    Prompt,
    PromptDeleted,
    PromptVersion,
    Rollback,
    RunResult,
)

# -- the calls ---------------------------------------------------------------------------------


# Versions per request when the SDK lists a prompt's versions: the collector's largest page.
_VERSIONS_PAGE = 100


def _names(values: str | Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [values] if isinstance(values, str) else list(values)


def _create(fields: dict[str, Any]) -> Call[Prompt]:
    return Call("POST", "/v1/prompts", data_of(Prompt), body=body_of(**fields))


def _get(name: str) -> Call[Prompt]:
    return Call("GET", prompt_path(name), data_of(Prompt))


def _list_page(
    limit: int | None, tags: list[str] | None, folder: str | None, search: str | None
) -> Callable[[str | None], Call[Page[Prompt]]]:
    def page(cursor: str | None) -> Call[Page[Prompt]]:
        query = params(limit=limit, cursor=cursor, tags=tags, folder=folder, search=search)
        return Call("GET", "/v1/prompts", page_of(Prompt), params=query)

    return page


def _update(name: str, fields: dict[str, Any]) -> Call[Prompt]:
    return Call("PATCH", prompt_path(name), data_of(Prompt), body=body_of(**fields))


def _delete(name: str) -> Call[PromptDeleted]:
    return Call("DELETE", prompt_path(name), data_of(PromptDeleted))


def _versions_page(name: str) -> Callable[[str | None], Call[Page[PromptVersion]]]:
    # The collector pages a prompt's versions (issue 35): follow the cursors to the end.
    def page(cursor: str | None) -> Call[Page[PromptVersion]]:
        query = params(limit=_VERSIONS_PAGE, cursor=cursor)
        return Call("GET", prompt_path(name, "versions"), page_of(PromptVersion), params=query)

    return page


def _version(name: str, number: int) -> Call[PromptVersion]:
    return Call("GET", prompt_path(name, "versions", number), data_of(PromptVersion))


def _rollback(name: str, version: int, labels: Sequence[str] | None) -> Call[Rollback]:
    body = body_of(version=version, labels=_names(labels))
    return Call("POST", prompt_path(name, "rollback"), data_of(Rollback), body=body)


def _labels(name: str) -> Call[list[Label]]:
    return Call("GET", prompt_path(name, "labels"), data_list_of(Label))


def _set_label(name: str, label: str, version: int) -> Call[Label]:
    path = prompt_path(name, "labels", label)
    return Call("PUT", path, data_of(Label), body={"version": version})


def _remove_label(name: str, label: str) -> Call[LabelRemoved]:
    return Call("DELETE", prompt_path(name, "labels", label), data_of(LabelRemoved))


def _diff(name: str, from_: int | str, to: int | str) -> Call[PromptDiff]:
    query = params(**{"from": from_, "to": to})
    return Call("GET", prompt_path(name, "diff"), data_of(PromptDiff), params=query)


def _run(
    key: TemplateKey,
    user_input: str | None,
    variables: Mapping[str, Any] | None,
    metadata: Mapping[str, Any] | None,
    stream: bool,
) -> Call[RunResult]:
    body = body_of(
        user_input=user_input, variables=variables, metadata=metadata, stream=stream or None
    )
    return Call("POST", addressed_path(key, "run"), data_of(RunResult), body=body)


def _prompt_fields(
    template: str | None,
    model: str | None,
    description: str | None,
    parameters: Mapping[str, Any] | None,
    tags: Sequence[str] | None,
    folder: str | None,
    labels: Sequence[str] | None,
) -> dict[str, Any]:
    return {
        "template": template,
        "model": model,
        "description": description,
        "parameters": dict(parameters) if parameters is not None else None,
        "tags": _names(tags),
        "folder": folder,
        "labels": _names(labels),
    }


def _chat_fields(
    messages: Sequence[Mapping[str, Any]] | None,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None,
    response_format: Mapping[str, Any] | None,
    variables_schema: Mapping[str, Any] | None,
    config: Any,
) -> dict[str, Any]:
    # A chat prompt's fields, and those either type may carry (docs/api-notes.md, Chat
    # prompts); None leaves a field out (unchanged, in an update).
    return {
        "messages": [dict(m) for m in messages] if messages is not None else None,
        "tools": [dict(t) for t in tools] if tools is not None else None,
        "tool_choice": tool_choice,
        "response_format": response_format,
        "variables_schema": variables_schema,
        "config": config,
    }


def _created(name: str, fields: dict[str, Any], chat: dict[str, Any]) -> Call[Prompt]:
    # Messages make a chat prompt; the wire says so with ``type``.
    kind = "chat" if chat["messages"] is not None else None
    return _create({"name": name, "type": kind, **fields, **chat})


T = TypeVar("T")

# -- sync --------------------------------------------------------------------------------------


class Prompts:
    """Manage prompts, their versions and labels; fetch templates; run prompts."""

    def __init__(self, http: SyncHTTP, cache: TemplateCache) -> None:
        self._http = http
        self._cache = cache

    def create(
        self,
        name: str,
        template: str | None = None,
        model: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        variables_schema: Mapping[str, Any] | None = None,
        config: Any = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        folder: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> Prompt:
        """Create a prompt at version 1 (``labels`` are attached to it).

        ``messages`` instead of ``template`` make a chat prompt; either type may carry
        ``tools``, ``tool_choice``, ``response_format``, ``variables_schema`` and ``config``.

        >>> client.prompts.create("greet", "Say hello to {name}.", "gpt-4o-mini")
        >>> client.prompts.create("support", messages=[{"role": "system", "content":
        ...     "You help with {{product}}."}, {"type": "placeholder", "name": "history"}],
        ...     model="gpt-4o-mini")
        """
        fields = _prompt_fields(template, model, description, parameters, tags, folder, labels)
        chat = _chat_fields(messages, tools, tool_choice, response_format, variables_schema, config)
        return self._http.call(_created(name, fields, chat))

    def get(self, name: str) -> Prompt:
        """Return a prompt's newest version, by name or id."""
        return self._http.call(_get(name))

    def list(
        self,
        *,
        tags: str | Sequence[str] | None = None,
        folder: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Prompt]:
        """Iterate over prompts, newest first, fetching pages of ``limit`` as needed.

        ``tags`` keeps prompts carrying all of them; ``folder`` includes its subfolders.
        """
        return self._http.paginate(_list_page(limit, _names(tags), folder, search))

    def update(
        self,
        name: str,
        *,
        template: str | None = None,
        model: str | None = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        variables_schema: Mapping[str, Any] | None = None,
        config: Any = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        folder: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> Prompt:
        """Make a new version with the given fields changed (``labels`` move to it); a chat
        prompt's ``messages``, ``tools``... too. A field left None stays as it is."""
        fields = _prompt_fields(template, model, description, parameters, tags, folder, labels)
        chat = _chat_fields(messages, tools, tool_choice, response_format, variables_schema, config)
        return self._change(name, _update(name, {**fields, **chat}))

    def delete(self, name: str) -> PromptDeleted:
        """Soft-delete a prompt: it vanishes from get, list, template and run."""
        return self._change(name, _delete(name))

    def versions(self, name: str) -> builtins.list[PromptVersion]:
        """Return every version of a prompt, newest first (all pages of them)."""
        return builtins.list(self._http.paginate(_versions_page(name)))

    def version(self, name: str, number: int) -> PromptVersion:
        """Return one version, with its parameters."""
        return self._http.call(_version(name, number))

    def rollback(self, name: str, version: int, *, labels: Sequence[str] | None = None) -> Rollback:
        """Make a new version restoring an earlier version's template, model and parameters."""
        return self._change(name, _rollback(name, version, labels))

    def labels(self, name: str) -> builtins.list[Label]:
        """Return a prompt's labels and the versions they point at, sorted by label."""
        return self._http.call(_labels(name))

    def set_label(self, name: str, label: str, version: int) -> Label:
        """Attach a label to a version, moving it off any other version."""
        return self._change(name, _set_label(name, label, version))

    def remove_label(self, name: str, label: str) -> LabelRemoved:
        """Detach a label from the prompt."""
        return self._change(name, _remove_label(name, label))

    def diff(self, name: str, *, from_: int | str, to: int | str) -> PromptDiff:
        """Return what changed from one version to another, each a version number or a label:
        per message, per tool (its JSON Schema key by key) and per parameter."""
        return self._http.call(_diff(name, from_, to))

    def template(
        self,
        name: str,
        *,
        label: str | None = None,
        version: int | None = None,
        ttl: float | None = None,
        fallback: str | PromptTemplate | None = None,
    ) -> PromptTemplate:
        """Return a template to run locally, cached for the client's TTL (or ``ttl``).

        Address it by ``label``, by ``version``, or neither for the newest. An expired copy
        is served at once while a background refresh fetches the new one. When the
        collector is down, the last good copy is served (with a warning), or ``fallback``
        (template text with ``{{var}}``) when nothing was ever fetched.

        >>> client.prompts.template("greet", label="production").render(name="Ada")
        """
        key = template_key(name, label, version)
        cached = self._cache.lookup(key)
        if cached is not None:
            if cached.refresh:
                self._refresh_in_background(key, ttl)
            return cached.template
        try:
            outcome: PromptTemplate | PromptrailError = self._http.call(template_call(key))
        except PromptrailError as exc:
            outcome = exc
        return self._cache.fetched(key, outcome, ttl, fallback)

    def _refresh_in_background(self, key: TemplateKey, ttl: float | None) -> None:
        thread = threading.Thread(
            target=self._refresh, args=(key, ttl), name="promptrail-template", daemon=True
        )
        thread.start()

    def _refresh(self, key: TemplateKey, ttl: float | None) -> None:
        try:
            outcome: PromptTemplate | Exception = self._http.call(template_call(key))
        except Exception as exc:  # e.g. the client was closed meanwhile: the cache decides
            outcome = exc
        self._cache.refreshed(key, outcome, ttl)

    def _change(self, name: str, call: Call[T]) -> T:
        """Send a call that changes prompt ``name``; its cached templates are then dropped."""
        changed = self._http.call(call)
        self._cache.invalidate(name)
        return changed

    @overload
    def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = ...,
        user_input: str | None = ...,
        metadata: Mapping[str, Any] | None = ...,
        label: str | None = ...,
        version: int | None = ...,
        stream: Literal[False] = ...,
    ) -> RunResult: ...

    @overload
    def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = ...,
        user_input: str | None = ...,
        metadata: Mapping[str, Any] | None = ...,
        label: str | None = ...,
        version: int | None = ...,
        stream: Literal[True],
    ) -> RunStream: ...

    def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = None,
        user_input: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        label: str | None = None,
        version: int | None = None,
        stream: bool = False,
    ) -> RunResult | RunStream:
        """Run a prompt on the collector (newest version, ``version`` or ``label``).

        Return the :class:`RunResult`, or with ``stream=True`` a :class:`RunStream` of event
        dicts (``start``, ``chunk``..., ``end`` or ``error``). Errors found before the stream
        starts (unknown prompt, missing variables) are raised either way.
        """
        call = _run((name, label, version), user_input, variables, metadata, stream)
        if not stream:
            return self._http.call(call)
        return RunStream(self._http.send(call, stream=True))


# -- async -------------------------------------------------------------------------------------


class AsyncPrompts:
    """Manage prompts, versions and labels; fetch templates; run prompts (``await`` each)."""

    def __init__(self, http: AsyncHTTP, cache: TemplateCache) -> None:
        self._refreshes: set[asyncio.Task[None]] = set()
        self._http = http
        self._cache = cache

    async def create(
        self,
        name: str,
        template: str | None = None,
        model: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        variables_schema: Mapping[str, Any] | None = None,
        config: Any = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        folder: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> Prompt:
        """Create a prompt at version 1 (see :meth:`Prompts.create`)."""
        fields = _prompt_fields(template, model, description, parameters, tags, folder, labels)
        chat = _chat_fields(messages, tools, tool_choice, response_format, variables_schema, config)
        return await self._http.call(_created(name, fields, chat))

    async def get(self, name: str) -> Prompt:
        """Return a prompt's newest version, by name or id."""
        return await self._http.call(_get(name))

    def list(
        self,
        *,
        tags: str | Sequence[str] | None = None,
        folder: str | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Prompt]:
        """Iterate (``async for``) over prompts, newest first, page by page as needed."""
        return self._http.paginate(_list_page(limit, _names(tags), folder, search))

    async def update(
        self,
        name: str,
        *,
        template: str | None = None,
        model: str | None = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        variables_schema: Mapping[str, Any] | None = None,
        config: Any = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        folder: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> Prompt:
        """Make a new version with the given fields changed (see :meth:`Prompts.update`)."""
        fields = _prompt_fields(template, model, description, parameters, tags, folder, labels)
        chat = _chat_fields(messages, tools, tool_choice, response_format, variables_schema, config)
        return await self._change(name, _update(name, {**fields, **chat}))

    async def delete(self, name: str) -> PromptDeleted:
        """Soft-delete a prompt."""
        return await self._change(name, _delete(name))

    async def versions(self, name: str) -> builtins.list[PromptVersion]:
        """Return every version of a prompt, newest first (all pages of them)."""
        return [version async for version in self._http.paginate(_versions_page(name))]

    async def version(self, name: str, number: int) -> PromptVersion:
        """Return one version, with its parameters."""
        return await self._http.call(_version(name, number))

    async def rollback(
        self, name: str, version: int, *, labels: Sequence[str] | None = None
    ) -> Rollback:
        """Make a new version restoring an earlier one (see :meth:`Prompts.rollback`)."""
        return await self._change(name, _rollback(name, version, labels))

    async def labels(self, name: str) -> builtins.list[Label]:
        """Return a prompt's labels and the versions they point at, sorted by label."""
        return await self._http.call(_labels(name))

    async def set_label(self, name: str, label: str, version: int) -> Label:
        """Attach a label to a version, moving it off any other version."""
        return await self._change(name, _set_label(name, label, version))

    async def remove_label(self, name: str, label: str) -> LabelRemoved:
        """Detach a label from the prompt."""
        return await self._change(name, _remove_label(name, label))

    async def diff(self, name: str, *, from_: int | str, to: int | str) -> PromptDiff:
        """Return what changed from one version to another, each a version number or a label:
        per message, per tool (its JSON Schema key by key) and per parameter."""
        return await self._http.call(_diff(name, from_, to))

    async def template(
        self,
        name: str,
        *,
        label: str | None = None,
        version: int | None = None,
        ttl: float | None = None,
        fallback: str | PromptTemplate | None = None,
    ) -> PromptTemplate:
        """Return a cached template to run locally (see :meth:`Prompts.template`)."""
        key = template_key(name, label, version)
        cached = self._cache.lookup(key)
        if cached is not None:
            if cached.refresh:
                self._refresh_in_background(key, ttl)
            return cached.template
        try:
            outcome: PromptTemplate | PromptrailError = await self._http.call(template_call(key))
        except PromptrailError as exc:
            outcome = exc
        return self._cache.fetched(key, outcome, ttl, fallback)

    def _refresh_in_background(self, key: TemplateKey, ttl: float | None) -> None:
        refresh = self._refresh(key, ttl)
        task = asyncio.get_running_loop().create_task(refresh, name="promptrail-template")
        self._refreshes.add(task)  # the loop keeps only a weak reference to its tasks
        task.add_done_callback(self._refreshes.discard)

    async def _refresh(self, key: TemplateKey, ttl: float | None) -> None:
        try:
            outcome: PromptTemplate | Exception = await self._http.call(template_call(key))
        except Exception as exc:  # e.g. the client was closed meanwhile: the cache decides
            outcome = exc
        self._cache.refreshed(key, outcome, ttl)

    async def _change(self, name: str, call: Call[T]) -> T:
        """Send a call that changes prompt ``name``; its cached templates are then dropped."""
        changed = await self._http.call(call)
        self._cache.invalidate(name)
        return changed

    @overload
    async def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = ...,
        user_input: str | None = ...,
        metadata: Mapping[str, Any] | None = ...,
        label: str | None = ...,
        version: int | None = ...,
        stream: Literal[False] = ...,
    ) -> RunResult: ...

    @overload
    async def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = ...,
        user_input: str | None = ...,
        metadata: Mapping[str, Any] | None = ...,
        label: str | None = ...,
        version: int | None = ...,
        stream: Literal[True],
    ) -> AsyncRunStream: ...

    async def run(
        self,
        name: str,
        *,
        variables: Mapping[str, Any] | None = None,
        user_input: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        label: str | None = None,
        version: int | None = None,
        stream: bool = False,
    ) -> RunResult | AsyncRunStream:
        """Run a prompt on the collector (see :meth:`Prompts.run`).

        With ``stream=True`` return an :class:`AsyncRunStream` to read with ``async for``.
        """
        call = _run((name, label, version), user_input, variables, metadata, stream)
        if not stream:
            return await self._http.call(call)
        return AsyncRunStream(await self._http.send(call, stream=True))
