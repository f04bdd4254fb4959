"""Run a managed prompt locally: fetch its template by label, call the model, log the result.

Against a local collector (``make run`` prints a development key)::

    PROMPTRAIL_API_KEY=<key> .venv/bin/python examples/local_template.py

With ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL`` for any OpenAI-compatible server) set, the
rendered prompt goes to the model with your own key; without them the prompt is printed and a
placeholder answer is logged. Either way the call shows up in ``GET /v1/requests``.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import promptrail

PROMPT = "support-reply"
LABEL = "production"


def ensure_prompt(client: promptrail.Client) -> None:
    """Create the example prompt, labelled production, unless it exists already."""
    with contextlib.suppress(promptrail.ConflictError):
        client.prompts.create(
            PROMPT,
            "You are a friendly support agent for {product}. Answer in {language}.",
            os.environ.get("EXAMPLE_MODEL", "gpt-4o-mini"),
            parameters={"temperature": 0.2, "max_tokens": 200},
            labels=[LABEL],
        )


def call_model(tpl: promptrail.PromptTemplate, messages: list[dict[str, str]]) -> dict[str, Any]:
    """Call OpenAI (or a compatible server) if configured; return output, usage, latency."""
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        print("No OPENAI_API_KEY / OPENAI_BASE_URL: the rendered prompt would be sent as")
        for message in messages:
            print(f"  {message['role']}: {message['content']}")
        return {"output": "(not run: no model configured)", "usage": {}, "latency_ms": 0}
    from openai import OpenAI

    options: dict[str, Any] = {}
    if tpl.temperature is not None:
        options["temperature"] = tpl.temperature
    if tpl.max_tokens is not None:
        options["max_tokens"] = tpl.max_tokens
    model = OpenAI()
    started = time.perf_counter()
    completion = model.chat.completions.create(model=tpl.model, messages=messages, **options)
    latency_ms = round((time.perf_counter() - started) * 1000)
    usage = completion.usage
    return {
        "output": completion.choices[0].message.content or "",
        "usage": {
            "prompt_tokens": usage.prompt_tokens if usage else 0,
            "completion_tokens": usage.completion_tokens if usage else 0,
        },
        "latency_ms": latency_ms,
    }


def main() -> None:
    """Fetch, render, run and log one support reply."""
    variables = {"product": "promptrail", "language": "English"}
    question = "How do I roll back a prompt?"
    with promptrail.Client() as client:
        ensure_prompt(client)
        tpl = client.prompts.template(PROMPT, label=LABEL)
        messages = tpl.messages(variables, user_input=question)
        answer = call_model(tpl, messages)

        record = client.requests.log(
            prompt_name=tpl.prompt_name,
            version=tpl.version,
            model=tpl.model,
            provider=tpl.provider,
            input_variables=variables,
            input=messages,
            output=answer["output"],
            usage=answer["usage"],
            latency_ms=answer["latency_ms"],
            metadata={"example": "local_template"},
        )
        print(f"answer: {answer['output']}")
        print(f"logged {record.id} (version {tpl.version} of {tpl.prompt_name!r})")


if __name__ == "__main__":
    main()
