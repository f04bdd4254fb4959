"""A chat prompt with a tool and a JSON-schema answer: stored in the registry, compiled by the
SDK, sent to OpenAI (and to Anthropic with ``anthropic_kwargs``), the tool's result sent back.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints,
    export ANTHROPIC_BASE_URL=http://127.0.0.1:8100 ANTHROPIC_API_KEY=sk-stub  # both lines)
    .venv/bin/python examples/chat_tools.py

The prompt version holds what the app sends: messages (Mustache variables, a section, a
history placeholder), the ``get_weather`` tool, a JSON-schema answer and the variables' types.
The app compiles it, runs the tool the model calls and sends its result back until the model
answers. Each provider whose key is set is called with the prompt's model, so against a real
Anthropic set ANTHROPIC_API_KEY only, and a Claude model: PROMPTRAIL_EXAMPLE_MODEL picks the
prompt's model (default gpt-4o-mini). On Anthropic the JSON answer is a forced tool, so the model
answers at once (docs/api-notes.md, "Chat prompts"). The stub calls the tool with its arguments
made from the tool's schema and answers the echo of the tool's result. Every call is logged
with the prompt's name and version, with no argument for it: ``GET /v1/requests``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import promptrail

PROMPT = "example-weather-advice"
LABEL = "production"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Today's weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
ADVICE = {
    "type": "json_schema",
    "json_schema": {
        "name": "advice",
        "schema": {
            "type": "object",
            "properties": {"advice": {"type": "string"}, "umbrella": {"type": "boolean"}},
            "required": ["advice", "umbrella"],
        },
    },
}


def ensure_prompt(client: promptrail.Client) -> None:
    """Create the chat prompt, labelled production, unless it exists already."""
    with contextlib.suppress(promptrail.ConflictError):
        client.prompts.create(
            PROMPT,
            model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
            messages=[
                {
                    "role": "system",
                    "content": "You help {{traveller.name}} pack for a trip. Answer in "
                    "{{language}}.{{#brief}} Keep it to one sentence.{{/brief}}",
                },
                {"type": "placeholder", "name": "history"},
                {"role": "user", "content": "{{question}}"},
            ],
            tools=[WEATHER_TOOL],
            tool_choice="auto",
            response_format=ADVICE,
            variables_schema={
                "type": "object",
                "properties": {
                    "traveller": {"type": "object", "properties": {"name": {"type": "string"}}},
                    "language": {"type": "string"},
                    "question": {"type": "string"},
                    "brief": {"type": "boolean"},
                },
                "required": ["traveller", "language", "question"],
            },
            parameters={"temperature": 0.2, "max_tokens": 300},
            labels=[LABEL],
        )


def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """The app's tool: a real app would call a weather service here."""
    return {"city": city, "temperature": 12 if unit == "celsius" else 54, "sky": "light rain"}


def ask_openai(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Send the compiled prompt to OpenAI, run the tools it calls, return the JSON answer."""
    import openai

    client = openai.OpenAI()
    messages = kwargs.pop("messages")
    while True:
        choice = client.chat.completions.create(messages=messages, **kwargs).choices[0]
        calls = choice.message.tool_calls or []
        if not calls:
            return dict(json.loads(choice.message.content or "{}"))
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in calls:
            arguments = json.loads(call.function.arguments)  # type: ignore[union-attr]
            print(f"  openai called {call.function.name}({arguments})")  # type: ignore[union-attr]
            result = get_weather(**arguments)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )


def ask_anthropic(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Send the compiled prompt to Anthropic; the forced ``advice`` tool's input is the answer."""
    import anthropic

    client = anthropic.Anthropic()
    messages = kwargs.pop("messages")
    while True:
        message = client.messages.create(messages=messages, **kwargs)
        uses = [block for block in message.content if block.type == "tool_use"]
        answer = next((use for use in uses if use.name == "advice"), None)
        if answer is not None:
            return dict(answer.input)  # type: ignore[arg-type]
        if not uses:
            return {"advice": "".join(b.text for b in message.content if b.type == "text")}
        messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
        results = []
        for use in uses:
            print(f"  anthropic called {use.name}({use.input})")
            result = get_weather(**use.input)  # type: ignore[arg-type]
            results.append(
                {"type": "tool_result", "tool_use_id": use.id, "content": json.dumps(result)}
            )
        messages.append({"role": "user", "content": results})


def main() -> None:
    """Fetch the chat template by label, compile it, and ask each configured provider."""
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("ANTHROPIC_API_KEY")):
        sys.exit("set OPENAI_API_KEY or ANTHROPIC_API_KEY (see the first lines of this file)")
    promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
    promptrail.instrument()  # every openai / anthropic call is logged

    with promptrail.Client() as client:
        ensure_prompt(client)
        tpl = client.prompts.template(PROMPT, label=LABEL)
    print(f"{tpl.prompt_name} version {tpl.version}: variables {sorted(tpl.variables)}")

    history = [
        {"role": "user", "content": "I fly to Lisbon on Friday."},
        {"role": "assistant", "content": "Have a good trip! How can I help?"},
    ]
    values: dict[str, Any] = {
        "traveller": {"name": "Ada"},
        "language": "English",
        "question": "What should I pack for Lisbon today?",
        "brief": True,
    }
    try:  # a missing or mistyped variable is caught here, before anything reaches a model
        tpl.compile({"history": history}, language="English")
    except promptrail.TemplateError as error:
        print(f"caught before sending: missing {error.missing_variables}")

    if os.environ.get("OPENAI_API_KEY"):
        answer = ask_openai(tpl.openai_kwargs({"history": history}, **values))
        print(f"openai answer: {answer}")
    if os.environ.get("ANTHROPIC_API_KEY"):
        answer = ask_anthropic(tpl.anthropic_kwargs({"history": history}, **values))
        print(f"anthropic answer: {answer}")

    promptrail.flush()
    print("captured:", promptrail.stats())


if __name__ == "__main__":
    main()
