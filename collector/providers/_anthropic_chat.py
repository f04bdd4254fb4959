"""A chat prompt's request in Anthropic's Messages shape (docs/api-notes.md, "Chat prompts").

A chat prompt is written in OpenAI's shapes; for an Anthropic model a run converts it:

- system and developer messages → the top-level ``system`` text (joined by a blank line);
- text parts as they are; an ``image_url`` part → an ``image`` block (a ``data:`` URL as
  base64, any other as a URL source);
- an assistant's ``tool_calls`` → ``tool_use`` blocks (their arguments parsed); a ``tool``
  message → a user message holding a ``tool_result`` block for its ``tool_call_id``;
- tools → ``{name, description, input_schema}``; ``tool_choice`` ``auto``, ``none``,
  ``required``, a named function → ``{"type": "auto" | "none" | "any" | "tool"}``;
- a ``json_schema`` response format → one more tool, named as the schema, whose input is the
  answer, forced with ``tool_choice``; its input's JSON becomes the run's output text, and it is
  not reported as a tool call (``text`` and ``json_object`` formats send nothing);
- the stop reasons ``end_turn``, ``stop_sequence`` → ``stop``, ``max_tokens`` → ``length``,
  ``tool_use`` → ``tool_calls`` (``stop`` when the call is the forced answer).
"""

from __future__ import annotations

import json
from typing import Any

from . import CompletionRequest, wire_message

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "pause_turn": "stop",
    "refusal": "stop",
}


def answer_tool(request: CompletionRequest) -> str | None:
    """The name of the tool that stands for a JSON-schema answer, if the request asks for one."""
    format_ = request.response_format or {}
    if format_.get("type") != "json_schema":
        return None
    return str((format_.get("json_schema") or {}).get("name") or "answer")


def finish_reason(stop_reason: str | None, answered: bool) -> str | None:
    """OpenAI's finish reason for an Anthropic stop reason; ``answered``: the forced answer
    tool was called, which is the answer, not a tool call."""
    if stop_reason is None:
        return None
    if answered and stop_reason == "tool_use":
        return "stop"
    return _STOP_REASONS.get(stop_reason, stop_reason)


def chat_body(request: CompletionRequest, body: dict[str, Any]) -> None:
    """Fill ``body``'s ``system``, ``messages``, ``tools`` and ``tool_choice`` from a chat
    prompt's request."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in (wire_message(m) for m in request.messages):
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text(message.get("content")))
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": _text(message.get("content")),
            }
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append({"role": role, "content": _blocks(message)})
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = messages
    tools = [_tool(t) for t in request.tools or []]
    choice = _tool_choice(request.tool_choice)
    name = answer_tool(request)
    if name is not None:
        schema = (request.response_format or {}).get("json_schema") or {}
        tools.append(
            {
                "name": name,
                "description": "Answer with this tool: its input is the answer.",
                "input_schema": schema.get("schema") or {"type": "object"},
            }
        )
        choice = {"type": "tool", "name": name}
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    blocks: list[dict[str, Any]] = []
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    elif isinstance(content, list):
        for part in content:
            if part.get("type") == "text":
                blocks.append({"type": "text", "text": str(part.get("text", ""))})
            elif part.get("type") == "image_url":
                blocks.append(_image(str((part.get("image_url") or {}).get("url", ""))))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id", "")),
                "name": str(function.get("name", "")),
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return blocks


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[len("data:") :].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    out: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object"},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    if choice is None:
        return None
    if isinstance(choice, dict):
        return {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    return {"type": {"auto": "auto", "none": "none", "required": "any"}.get(choice, "auto")}
