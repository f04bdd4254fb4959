"""Quick start: every OpenAI call of this script lands in the promptrail request log.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2
    export OPENAI_API_KEY=sk-...               # or OPENAI_BASE_URL for any compatible server
    .venv/bin/python examples/quickstart_openai.py

Then open http://127.0.0.1:8000/v1/requests with your key (or `curl` it) to see the record.
"""

from __future__ import annotations

import os

import openai

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument("openai")

client = openai.OpenAI()
reply = client.chat.completions.create(
    model=os.environ.get("MODEL", "gpt-4o-mini"),
    messages=[{"role": "user", "content": "Say hello to promptrail in five words."}],
)
print(reply.choices[0].message.content)

promptrail.flush()
print("captured:", promptrail.stats())
