"""Templates: parse, list variables, render, and the double-brace payload.

A stored template writes variables as ``{name}`` and literal braces as ``{{`` and ``}}``
(Python ``str.format`` rules, restricted to identifier names, any script included). A
lone brace is an error, so a template that parses today renders the same way on the service
and on every client. The payload a client renders itself (spec 2.3, docs/api-notes.md, "Prompts")
names the
provider that serves the version's model, as runs choose it (``providers.routing``).

A chat prompt's messages are Mustache instead (``promptrail._mustache``, the renderer the SDK
shares): :func:`check_messages` refuses one that does not parse, and its payload carries the
messages unrendered with the variables they use (docs/api-notes.md, Chat prompts).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from pydantic import ValidationError as PydanticError

from promptrail._mustache import (
    MustacheError,
    Variable,
    merge_variable,
    mustache_variables,
    render_mustache,
)

from ..errors import InvalidTemplate, ValidationFailed
from ..models.chat_prompts import ChatMessage as PromptMessage
from ..models.chat_prompts import stored
from ..models.prompts import TemplateOut, VariableSpec
from ..providers.routing import provider_for
from ..store.prompts import PromptVersionRow

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_EXCERPT = 200


@dataclass(frozen=True)
class Segment:
    """A piece of a parsed template: literal text, or a variable when ``variable`` is set."""

    text: str
    variable: str | None = None


def parse_template(template: str) -> list[Segment]:
    """Split a template into literal and variable segments, or raise InvalidTemplate."""
    return list(_segments(template))


def _segments(template: str) -> Iterator[Segment]:
    position = 0
    for match in _TOKEN.finditer(template):
        if match.start() > position:
            yield Segment(template[position : match.start()])
        token = match.group(0)
        name = match.group(1)
        if name is not None and name.isidentifier():
            yield Segment(token, variable=name)
        elif name is not None:
            raise InvalidTemplate(
                f"'{token}' at position {match.start()} is not a variable: names are "
                "identifiers (letters, digits, '_'; not starting with a digit); write '{{' "
                "and '}}' for literal braces",
                {"position": match.start(), "template": _excerpt(template)},
            )
        elif token in ("{{", "}}"):
            yield Segment(token[0])
        else:
            raise InvalidTemplate(
                f"Unmatched '{token}' at position {match.start()}: write '{token * 2}' for a "
                "literal brace, or {name} for a variable",
                {"position": match.start(), "template": _excerpt(template)},
            )
        position = match.end()
    if position < len(template):
        yield Segment(template[position:])


def template_variables(template: str) -> list[str]:
    """Return the template's variable names in order of first use."""
    seen: dict[str, None] = {}
    for segment in parse_template(template):
        if segment.variable is not None:
            seen.setdefault(segment.variable)
    return list(seen)


def render_template(template: str, values: Mapping[str, object]) -> str:
    """Fill every variable from ``values``; raise InvalidTemplate naming the missing ones."""
    segments = parse_template(template)
    missing = sorted({s.variable for s in segments if s.variable and s.variable not in values})
    if missing:
        raise InvalidTemplate(
            f"Template variables are undefined: {', '.join(missing)}",
            {"missing_variables": missing, "template": template},
        )
    return "".join(str(values[s.variable]) if s.variable else s.text for s in segments)


def to_double_brace(template: str) -> str:
    """Rewrite ``{var}`` as ``{{var}}`` and the escapes ``{{``/``}}`` as single braces."""
    return "".join(
        "{{" + s.variable + "}}" if s.variable else s.text for s in parse_template(template)
    )


def _excerpt(template: str) -> str:
    return template if len(template) <= _EXCERPT else template[:_EXCERPT] + "…"


def message_texts(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Every text of ``messages`` Mustache may stand in, with its field path: contents,
    text parts and image URLs."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, str):
            yield f"messages.{index}.content", content
        elif isinstance(content, list):
            for at, part in enumerate(content):
                where = f"messages.{index}.content.{at}"
                if part.get("type") == "text":
                    yield f"{where}.text", str(part["text"])
                elif part.get("type") == "image_url":
                    yield f"{where}.image_url.url", str(part["image_url"]["url"])


def check_messages(messages: list[dict[str, Any]]) -> None:
    """Raise InvalidTemplate naming the first text of ``messages`` that does not parse."""
    for field, text in message_texts(messages):
        try:
            mustache_variables(text)
        except MustacheError as error:
            raise InvalidTemplate(
                f"{field} does not parse as Mustache: {error}",
                {"field": field, "template": _excerpt(text)},
            ) from None


def _chat_variables(row: PromptVersionRow) -> dict[str, VariableSpec]:
    """The variables of a chat prompt: from its schema when it has one, else those its
    messages use (a plain one a required string, a section's any)."""
    schema = row.variables_schema
    if schema is not None:
        required = set(schema.get("required") or ())
        properties: dict[str, Any] = schema.get("properties") or {}
        return {
            name: VariableSpec(type=_schema_type(spec), required=name in required)
            for name, spec in properties.items()
        }
    found: dict[str, Variable] = {}
    for _, text in message_texts(row.messages or []):
        for variable in mustache_variables(text):
            merge_variable(found, variable)
    return {v.name: VariableSpec(type=v.kind, required=v.required) for v in found.values()}


def _schema_type(spec: Any) -> str:
    """A property's JSON Schema type as one word (``any`` when it names none or several)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    return kind if isinstance(kind, str) else "any"


def template_payload(row: PromptVersionRow) -> TemplateOut:
    """Shape a version as the double-brace payload a client renders itself.

    A model name the routing rules do not know is served as ``openai``: the OpenAI wire
    format is what every OpenAI-compatible server (vLLM, Ollama, llama.cpp) speaks.
    """
    provider, model = provider_for(row.model) or ("openai", row.model)
    temperature = row.parameters.get("temperature")
    max_tokens = row.parameters.get("max_tokens")
    chat = row.type == "chat"
    return TemplateOut(
        prompt_id=str(uuid.UUID(hex=row.prompt_id)),
        prompt_name=row.name,
        version=row.version,
        version_id=row.version_id,
        type=row.type,
        content=None if chat else to_double_brace(row.template),
        messages=row.messages,
        placeholders=(
            [str(m["name"]) for m in row.messages or [] if m.get("type") == "placeholder"]
            if chat
            else None
        ),
        variables=(
            _chat_variables(row)
            if chat
            else {name: VariableSpec(type="string") for name in template_variables(row.template)}
        ),
        tools=row.tools,
        tool_choice=row.tool_choice,
        response_format=row.response_format,
        config=row.config,
        provider=provider,
        model=model,
        temperature=float(temperature) if temperature is not None else None,
        max_tokens=int(max_tokens) if max_tokens is not None else None,
    )


def render_chat(
    row: PromptVersionRow,
    variables: Mapping[str, Any],
    placeholders: Mapping[str, list[dict[str, Any]]],
    user_input: str | None,
) -> list[dict[str, Any]]:
    """Render a chat prompt's messages for a run (docs/api-notes.md, Chat prompts).

    Raises, before anything is sent: InvalidTemplate with ``missing_variables`` or
    ``missing_placeholders`` (sorted), ValidationFailed naming ``variables.<name>`` for a value
    its ``variables_schema`` refuses. Placeholders are spliced in as given (a history is never
    rendered as a template); a given ``user_input`` becomes a last user message.
    """
    specs = _chat_variables(row)
    missing = sorted(n for n, spec in specs.items() if spec.required and n not in variables)
    if missing:
        raise InvalidTemplate(
            f"Missing variables: {', '.join(missing)}", {"missing_variables": missing}
        )
    _check_types(row.variables_schema, variables)
    if row.variables_schema is None:
        # Without a schema a plain {{name}} takes text, as the SDK's compile checks it.
        for name, spec in specs.items():
            if spec.type == "string" and not isinstance(variables.get(name, ""), str):
                field = f"variables.{name}"
                raise ValidationFailed(
                    field, f"{field}: takes a string (the prompt has no variables_schema)"
                )
    messages = row.messages or []
    names = [str(m["name"]) for m in messages if m.get("type") == "placeholder"]
    unfilled = sorted({n for n in names if n not in placeholders})
    if unfilled:
        raise InvalidTemplate(
            f"Unfilled placeholders: {', '.join(unfilled)}", {"missing_placeholders": unfilled}
        )
    sent: list[dict[str, Any]] = []
    for message in messages:
        if message.get("type") == "placeholder":
            name = str(message["name"])
            sent.extend(_history(name, placeholders[name]))
        else:
            sent.append(_rendered(message, variables))
    if user_input is not None:
        sent.append({"role": "user", "content": user_input})
    return sent


def _check_types(schema: dict[str, Any] | None, variables: Mapping[str, Any]) -> None:
    """Raise ValidationFailed naming the first variable ``schema`` refuses (a missing one is
    reported as missing, before this)."""
    if schema is None:
        return
    validator = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    for error in validator(schema).iter_errors(dict(variables)):
        if error.validator == "required":
            continue
        path = [str(p) for p in error.absolute_path]
        field = "variables" + "".join(f".{p}" for p in path[:1])
        raise ValidationFailed(field, f"{field}: {error.message}")


def _history(name: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A placeholder's messages, checked as a prompt's messages are (a placeholder inside
    one refused) and sent as given, never rendered."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        field = f"placeholders.{name}.{index}"
        try:
            checked = PromptMessage.model_validate(message)
        except PydanticError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in (field, *first["loc"]))
            raise ValidationFailed(where, f"{where}: {first['msg']}") from None
        if checked.type == "placeholder":
            raise ValidationFailed(field, f"{field}: a placeholder's messages are messages")
        out.append(stored(checked))
    return out


def _rendered(message: dict[str, Any], variables: Mapping[str, Any]) -> dict[str, Any]:
    """A message with every text Mustache may stand in rendered (``message_texts``)."""
    out = {k: v for k, v in message.items() if v is not None}
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = render_mustache(content, variables)
    elif isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for part in content:
            part = dict(part)
            if part.get("type") == "text":
                part["text"] = render_mustache(str(part["text"]), variables)
            elif part.get("type") == "image_url":
                image = dict(part["image_url"])
                image["url"] = render_mustache(str(image["url"]), variables)
                part["image_url"] = image
            parts.append(part)
        out["content"] = parts
    return out
