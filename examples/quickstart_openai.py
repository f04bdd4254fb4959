"""Quick start: every OpenAI call of this script lands in the promptrail request log.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/quickstart_openai.py

PROMPTRAIL_EXAMPLE_MODEL picks the model (default gpt-4o-mini). Then list the records:
curl -H "Authorization: Bearer $PROMPTRAIL_API_KEY" http://127.0.0.1:8000/v1/requests
"""

from __future__ import annotations

import os

import openai

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument("openai")

client = openai.OpenAI()
reply = client.chat.completions.create(
    model=os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini"),
    messages=[{"role": "user", "content": "Say hello to promptrail in five words."}],
)
print(reply.choices[0].message.content)

promptrail.flush()
print("captured:", promptrail.stats())
