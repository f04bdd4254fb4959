"""How the stub provider plays a model that calls tools, from the request alone.

``promptrail stub-provider`` (a stub answering with :class:`~._replies.Replies`) reads each
request as a model would, in either wire format (OpenAI chat completions, Anthropic messages):

- a request that offers tools, whose last user message no rule matches, gets a call of a tool
  (the one ``tool_choice`` forces, else the first; none when the choice is ``none``) whose
  arguments are an instance of the tool's JSON Schema;
- a request whose conversation ends with tool results (OpenAI ``tool`` messages, an Anthropic
  user turn of ``tool_result`` blocks) gets a final text: the rules, else the echo, applied to
  those results, so an app's tool loop ends; only a tool the request forces is called again;
- an OpenAI request asking for a ``json_schema`` answer gets, instead of an echo, an instance of
  that schema as JSON text.

An instance of a schema is made deterministically: each string is the echo of what was asked,
a number or integer 1, a boolean true, an array one item, an object every property it lists;
``const``, then the first of ``enum``, ``anyOf`` or ``oneOf``, win over the type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A schema nested deeper than this is answered with null: no request makes the stub recurse
# without end (a schema can be deep, or a $ref loop written out by hand).
_MAX_DEPTH = 32


@dataclass(frozen=True)
class OfferedTool:
    """A tool a request offers: its name and the JSON Schema of its arguments."""

    name: str
    schema: Mapping[str, Any]


def tool_results(messages: Any) -> str | None:
    """The text of the tool results a conversation ends with (several joined by a newline), or
    None when its last message is not tool results."""
    if not isinstance(messages, Sequence) or not messages:
        return None
    results: list[str] = []
    # OpenAI: a run of tool messages at the end, one per call.
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "tool":
            break
        results.insert(0, _text(message.get("content")))
    if results:
        return "\n".join(results)
    # Anthropic: the last user turn holds tool_result blocks.
    last = messages[-1]
    if not isinstance(last, Mapping) or last.get("role") != "user":
        return None
    content = last.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return None
    blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    if not blocks:
        return None
    return "\n".join(_text(b.get("content")) for b in blocks)


def offered_tools(body: Mapping[str, Any]) -> list[OfferedTool]:
    """The tools a request offers, in order, in either wire format."""
    offered: list[OfferedTool] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping):  # OpenAI: {"type": "function", "function": {...}}
            name, schema = function.get("name"), function.get("parameters")
        else:  # Anthropic: {"name", "input_schema"}
            name, schema = tool.get("name"), tool.get("input_schema")
        if isinstance(name, str) and name:
            offered.append(OfferedTool(name, schema if isinstance(schema, Mapping) else {}))
    return offered


def forced_tool(body: Mapping[str, Any]) -> str | None:
    """The name of the tool ``tool_choice`` forces, in either wire format, if it forces one."""
    choice = body.get("tool_choice")
    if not isinstance(choice, Mapping):
        return None
    function = choice.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])  # OpenAI {"type": "function", "function": {"name"}}
    if choice.get("type") == "tool" and isinstance(choice.get("name"), str):
        return str(choice["name"])  # Anthropic {"type": "tool", "name"}
    return None


def tool_to_call(body: Mapping[str, Any]) -> OfferedTool | None:
    """The tool a model would call for this request: the forced one, else the first offered;
    None when none is offered or ``tool_choice`` is ``none``."""
    tools = offered_tools(body)
    choice = body.get("tool_choice")
    if (
        not tools
        or choice == "none"
        or (isinstance(choice, Mapping) and choice.get("type") == "none")
    ):
        return None
    forced = forced_tool(body)
    return next((t for t in tools if t.name == forced), tools[0])


def answer_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON Schema of the answer an OpenAI request asks for (``response_format``
    ``json_schema``), or None."""
    format_ = body.get("response_format")
    if not isinstance(format_, Mapping) or format_.get("type") != "json_schema":
        return None
    spec = format_.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, Mapping) else {"type": "object"}


def instance(schema: Any, text: str, depth: int = 0) -> Any:
    """A value the JSON Schema ``schema`` accepts, every string in it ``text``."""
    if depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return None if depth > _MAX_DEPTH else text
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, Sequence) and not isinstance(options, str) and options:
            return options[0] if key == "enum" else instance(options[0], text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, Sequence) and not isinstance(kind, str):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return {}
        return {str(k): instance(v, text, depth + 1) for k, v in properties.items()}
    if kind == "array":
        items = schema.get("items")
        return [instance(items, text, depth + 1)] if isinstance(items, Mapping) else []
    return {"string": text, "integer": 1, "number": 1, "boolean": True}.get(str(kind))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""
