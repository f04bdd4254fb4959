"""Run a managed prompt locally: fetch its template by label, call the model, log the result.

    export PROMPTRAIL_API_KEY=pr-...           # the key `make run` printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/local_template.py

PROMPTRAIL_EXAMPLE_MODEL picks the model of the prompt it creates (default gpt-4o-mini). With no
OPENAI_API_KEY the rendered prompt is printed and a placeholder answer is logged. Either way the
call shows up in ``GET /v1/requests``.
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
            os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
            parameters={"temperature": 0.2, "max_tokens": 200},
            labels=[LABEL],
        )


def call_model(tpl: promptrail.PromptTemplate, messages: list[dict[str, str]]) -> dict[str, Any]:
    """Call OpenAI (or a compatible server) if configured; return output, usage, latency."""
    # The openai SDK needs a key even for a server that ignores it (the stub, Ollama).
    if not os.environ.get("OPENAI_API_KEY"):
        print("No OPENAI_API_KEY: the rendered prompt would be sent as")
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
