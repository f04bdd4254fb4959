"""An experiment task that asks a model for capitals, captured as an application's calls are.

``promptrail.run_experiment`` runs its task in the caller's process: tests of what its records
cost (tests/sdk) and of where they are logged (tests/collector/experiments) run the same task,
the real ``openai`` SDK against the OpenAI wire stub, with capture on for the live collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import promptrail
from promptrail.testing import OpenAIStub
from tests.keys import DEFAULT_KEY
from tests.provider_clients import close_opened, openai_client

Task = Callable[[dict[str, Any]], str]


@contextmanager
def capitals_task(live_url: str, sdk: promptrail.Client, stub: OpenAIStub) -> Iterator[Task]:
    """Yield the task of dataset ``capitals`` (two items, France and UK, just created), with
    capture on for ``live_url`` (flushed every 50 ms) and openai instrumented; the stub replies
    "Paris is the capital". Capture stops and the opened clients close on leaving."""
    stub.script.reply = "Paris is the capital"
    sdk.datasets.create("capitals")
    items = [
        {"id": "fr", "input_variables": {"country": "France"}, "expected_output": "Paris"},
        {"id": "uk", "input_variables": {"country": "UK"}, "expected_output": "London"},
    ]
    assert sdk.datasets.add_items("capitals", items).accepted == 2
    promptrail.shutdown()
    promptrail.init(api_key=DEFAULT_KEY, base_url=live_url, flush_interval=0.05)
    promptrail.instrument()
    llm = openai_client(stub)

    def ask(item: dict[str, Any]) -> str:
        country = item["input_variables"]["country"]
        reply = llm.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"What is the capital of {country}?"}],
        )
        return reply.choices[0].message.content or ""

    try:
        yield ask
    finally:
        promptrail.uninstrument()
        promptrail.shutdown()
        close_opened()
