"""Chat templates: compile a chat prompt's messages locally and shape provider arguments.

A chat prompt's template payload holds its unrendered Mustache messages, placeholders, tools,
tool choice and answer format (docs/api-notes.md, Chat prompts). :func:`compile_messages`
checks the values against the payload's ``variables`` and renders them with the collector's
own Mustache (:mod:`promptrail._mustache`), so a local compile gives the bytes a run would;
:func:`openai_kwargs` and :func:`anthropic_kwargs` shape the result for each provider's SDK
(docs/sdk.md, "Chat templates", has the Anthropic mapping).

Types are checked by hand against the payload's ``variables`` (``{name: {type, required}}``):
the SDK does not depend on a JSON Schema validator (jsonschema is the collector's), and the
payload carries each variable's type, not the whole schema.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._context import remember_rendering
from ._errors import TemplateError
from ._mustache import _RENDERER, parse_mustache

if TYPE_CHECKING:
    from ._templates import PromptTemplate

# Anthropic requires max_tokens; the collector's runs send the same when a version sets none.
DEFAULT_ANTHROPIC_MAX_TOKENS = 1024

# The forced answer tool's description, the one a run on the collector sends for the same prompt.
ANSWER_TOOL_DESCRIPTION = "Answer with this tool: its input is the answer."

Placeholders = Mapping[str, Sequence[Mapping[str, Any]]]

# The Python values each JSON type takes (bool is not a number, as in JSON Schema).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (Mapping,),
    "null": (type(None),),
}


def _has_type(value: Any, kind: str) -> bool:
    types = _JSON_TYPES.get(kind)
    if types is None:  # "any", or a type this SDK does not know: the collector decides
        return True
    if isinstance(value, bool) and kind in ("number", "integer"):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, types)


def check_values(
    template: PromptTemplate, placeholders: Placeholders | None, values: Mapping[str, Any]
) -> None:
    """Raise :class:`TemplateError` naming every missing variable and placeholder (sorted),
    else the first value (by name) whose type the payload's ``variables`` refuse."""
    given = placeholders or {}
    missing_placeholders = [n for n in template.placeholders or [] if n not in given]
    missing_variables = [
        name for name, spec in template.variables.items() if spec.required and name not in values
    ]
    if missing_variables or missing_placeholders:
        said = []
        if missing_variables:
            said.append(f"variables are undefined: {', '.join(sorted(missing_variables))}")
        if missing_placeholders:
            said.append(f"placeholders are unfilled: {', '.join(sorted(missing_placeholders))}")
        raise TemplateError(
            "Template " + "; ".join(said),
            missing_variables=missing_variables,
            missing_placeholders=missing_placeholders,
        )
    for name in sorted(values):
        spec = template.variables.get(name)
        if spec is not None and not _has_type(values[name], spec.type):
            raise TemplateError(
                f"variables.{name}: expected {spec.type}, got {type(values[name]).__name__}",
                code="VALIDATION_ERROR",
                field=f"variables.{name}",
            )
    for name in sorted(given):
        filled = given[name]
        if isinstance(filled, str | bytes) or not all(isinstance(m, Mapping) for m in filled):
            raise TemplateError(
                f"placeholders.{name}: expected a list of messages",
                code="VALIDATION_ERROR",
                field=f"placeholders.{name}",
            )


# A template's texts are parsed once, not per compile (a third of a compile's time was
# pystache's parse): the collector checked they parse when the version was stored.
_parsed = functools.lru_cache(maxsize=4096)(parse_mustache)


def _render(text: str, values: Mapping[str, Any]) -> str:
    """Render one text with the shared Mustache renderer (docs/api-notes.md, Chat prompts)."""
    return str(_RENDERER.render(_parsed(text), values))


def _json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (the template payload's tools, schemas, tool calls): its
    dicts and lists new, its scalars shared. ``openai_kwargs`` spent a third of its time in
    ``copy.deepcopy`` of the tools; this takes a third of that (docs/benchmarks.md, "Chat
    prompts")."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def _copied(message: Mapping[str, Any]) -> dict[str, Any]:
    # A copy to render into, so the cached template is left as fetched: parts and image_url
    # dicts are new; anything else that is not text (tool_calls) is copied deep.
    copied = {
        k: v if isinstance(v, str | int | float | None) else _json_copy(v)
        for k, v in message.items()
        if k != "content"
    }
    content = message.get("content")
    if isinstance(content, list):
        content = [
            {k: dict(v) if k == "image_url" and isinstance(v, dict) else v for k, v in p.items()}
            for p in content
        ]
    if "content" in message:
        copied["content"] = content
    return copied


def compile_messages(
    template: PromptTemplate, placeholders: Placeholders | None, values: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Return the chat prompt's messages rendered with ``values``, placeholders filled.

    Variables stand in message contents, text parts and image URLs; a placeholder gives way
    to its messages as they are (a value is never rendered as a template).
    """
    check_values(template, placeholders, values)
    given = placeholders or {}
    compiled: list[dict[str, Any]] = []
    texts: list[str] = []  # the template's rendered texts, not the placeholders' messages
    for message in template.message_templates or []:
        if message.get("type") == "placeholder":
            compiled.extend(copy.deepcopy(dict(m)) for m in given[str(message["name"])])
            continue
        rendered = _copied(message)
        content = rendered.get("content")
        if isinstance(content, str):
            rendered["content"] = _render(content, values)
            texts.append(rendered["content"])
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text" and isinstance(part.get("text"), str):
                    part["text"] = _render(part["text"], values)
                    texts.append(part["text"])
                image = part.get("image_url")
                if part.get("type") == "image_url" and isinstance(image, dict):
                    image["url"] = _render(str(image.get("url", "")), values)
        compiled.append(rendered)
    remember_texts(template, texts, values)
    return compiled


def remember_texts(template: PromptTemplate, texts: list[str], values: Mapping[str, Any]) -> None:
    """Link a captured model call that sends one of ``texts`` to this prompt version, with
    ``values`` as its variables (the way a text template's ``render`` does)."""
    for text in texts:
        if text.strip():  # an empty message would link every call that sends one
            remember_rendering(text, template.prompt_name, template.version, values)


def _parameters(template: PromptTemplate) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if template.temperature is not None:
        found["temperature"] = template.temperature
    if template.max_tokens is not None:
        found["max_tokens"] = template.max_tokens
    return found


def openai_kwargs(template: PromptTemplate, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the arguments of OpenAI's ``chat.completions.create`` for ``messages``:
    tools, tool choice and answer format go as they are stored."""
    kwargs: dict[str, Any] = {"model": template.model, "messages": messages}
    for key in ("tools", "tool_choice", "response_format"):
        value = getattr(template, key)
        if value is not None:
            kwargs[key] = _json_copy(value)
    return {**kwargs, **_parameters(template)}


def anthropic_kwargs(
    template: PromptTemplate, messages: list[dict[str, Any]], values: Mapping[str, Any]
) -> dict[str, Any]:
    """Return the arguments of Anthropic's ``messages.create`` for ``messages``.

    System and developer messages become ``system``; tools take ``input_schema``; tool
    choice maps to auto/none/any/tool; a JSON-schema answer becomes a forced tool whose
    input is the answer (docs/sdk.md, "Chat templates").
    """
    system, turns = _anthropic_turns(messages)
    kwargs: dict[str, Any] = {"model": template.model}
    if system:
        kwargs["system"] = system
        remember_texts(template, [system], values)  # several system messages joined
    kwargs["messages"] = turns
    tools = [_anthropic_tool(t) for t in template.tools or []]
    choice = _anthropic_choice(template.tool_choice)
    answer = (template.response_format or {}).get("json_schema")
    if (template.response_format or {}).get("type") == "json_schema" and isinstance(answer, dict):
        name = str(answer.get("name") or "answer")
        tools.append(
            {
                "name": name,
                "description": ANSWER_TOOL_DESCRIPTION,
                "input_schema": _json_copy(answer.get("schema") or {"type": "object"}),
            }
        )
        choice = {"type": "tool", "name": name}
    if tools:
        kwargs["tools"] = tools
    if choice is not None:
        kwargs["tool_choice"] = choice
    parameters = _parameters(template)
    kwargs["max_tokens"] = parameters.pop("max_tokens", DEFAULT_ANTHROPIC_MAX_TOKENS)
    if parameters:
        # The anthropic SDK's messages.create takes no temperature argument in its newer
        # releases; extra_body sends it in the request body with any release.
        kwargs["extra_body"] = parameters
    return kwargs


def _anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    converted: dict[str, Any] = {"name": function.get("name")}
    if function.get("description") is not None:
        converted["description"] = function["description"]
    converted["input_schema"] = _json_copy(function.get("parameters") or {"type": "object"})
    return converted


def _anthropic_choice(choice: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, str):
        return {"type": {"required": "any"}.get(choice, choice)}
    return {"type": "tool", "name": (choice.get("function") or {}).get("name")}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return ""


def _anthropic_blocks(content: Any) -> str | list[dict[str, Any]]:
    if not isinstance(content, list):
        return "" if content is None else str(content)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            blocks.append({"type": "image", "source": _image_source(part["image_url"]["url"])})
    return blocks


def _image_source(url: str) -> dict[str, Any]:
    # A data URL travels as base64; any other as a URL Anthropic fetches.
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": head, "data": data}
    return {"type": "url", "url": url}


def _anthropic_turns(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        if role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": _text_of(message.get("content")),
            }
            last = turns[-1] if turns else None
            # Results of one assistant turn's calls travel together in one user turn.
            if last is not None and last.get("tool_results"):
                last["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result], "tool_results": True})
            continue
        content = _anthropic_blocks(message.get("content"))
        calls = message.get("tool_calls") or []
        if role == "assistant" and calls:
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            blocks = [b for b in blocks if b.get("type") != "text" or b.get("text")]
            blocks.extend(_tool_use(index, call) for call in calls)
            content = blocks
        turns.append({"role": role, "content": content})
    for turn in turns:
        turn.pop("tool_results", None)
    return "\n\n".join(s for s in system if s), turns


def _tool_use(index: int, call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        given = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        raise TemplateError(
            f"messages.{index}.tool_calls: arguments are not JSON",
            code="VALIDATION_ERROR",
            field=f"messages.{index}.tool_calls",
        ) from None
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": given}
