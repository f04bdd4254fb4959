"""pydantic-ai: an agent run is one trace, its model call one record under it.

    make run                                   # terminal 1: the collector (prints a key)
    export PROMPTRAIL_API_KEY=pr-...           # terminal 2: the key it printed
    export OPENAI_API_KEY=sk-...               # a real provider (OPENAI_BASE_URL: any compatible)
    .venv/bin/promptrail stub-provider         # or, without provider access: a local stub
    export OPENAI_BASE_URL=http://127.0.0.1:8100/v1 OPENAI_API_KEY=sk-stub   # (what it prints)
    .venv/bin/python examples/pydantic_ai_agent.py

Needs `pip install 'promptrail[pydantic-ai]'`. With a real model the agent may call its tool:
the tool call is a record under the run too. PROMPTRAIL_EXAMPLE_MODEL picks the model
(default gpt-4o-mini).
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel

import promptrail

promptrail.init()  # PROMPTRAIL_API_KEY, PROMPTRAIL_BASE_URL (default http://127.0.0.1:8000)
promptrail.instrument()  # openai, and pydantic-ai's agent and tool spans

agent = Agent(
    OpenAIChatModel(os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini")),
    name="greeter",
    instructions="Be brief.",
)


@agent.tool_plain
def team_size() -> int:
    """How many people work on promptrail."""
    return 5


with promptrail.context(user_id="ada"):
    print(agent.run_sync("Say hello to promptrail in five words.").output)
promptrail.flush()
