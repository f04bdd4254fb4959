"""``@promptrail.observe``: one trace per request, records for each step and model call.

    export PROMPTRAIL_API_KEY=pr-...           # the key `make run` printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/observe_decorator.py

PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini). The model call inside ``answer``
is logged against the prompt name and metadata given to the outer function; every record carries
the same trace_id, and parent_span_id links the steps.
"""

from __future__ import annotations

import os

import openai

import promptrail

promptrail.init()
promptrail.instrument()
client = openai.OpenAI()


@promptrail.observe(name="retrieve")
def retrieve(question: str) -> list[str]:
    return [f"Our store opens at 9am (doc for: {question})"]


@promptrail.observe(name="answer", exclude=["api_token"])
def answer(question: str, api_token: str) -> str:
    context = "\n".join(retrieve(question))
    reply = client.chat.completions.create(
        model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
        messages=[
            {"role": "system", "content": f"Answer from this context:\n{context}"},
            {"role": "user", "content": question},
        ],
    )
    return reply.choices[0].message.content or ""


@promptrail.observe(prompt_name="store-hours", metadata={"user_id": "u-42", "channel": "web"})
def handle(question: str) -> str:
    return answer(question, api_token="not-captured")


if __name__ == "__main__":
    print(handle("When do you open?"))
    promptrail.flush()
