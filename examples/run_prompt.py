"""Create a prompt through the REST API, run it on the collector, then stream it.

The collector calls the model itself, with its own provider settings; this script only needs
the collector's address and a key::

    OPENAI_API_KEY=sk-... make run             # a real provider (OPENAI_BASE_URL: any compatible)
    make demo                                  # or, without provider access: stub + collector
    export PROMPTRAIL_API_KEY=pr-...           # the key it printed
    .venv/bin/python examples/run_prompt.py

Environment: ``PROMPTRAIL_BASE_URL`` (default http://127.0.0.1:8000), ``PROMPTRAIL_API_KEY``
(required), ``PROMPTRAIL_EXAMPLE_MODEL`` (default gpt-4o-mini; ``openai/<name>`` sends any
model name to the OpenAI-compatible server).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx

PROMPT = "example-greeting"
TEMPLATE = "You are a cheerful assistant. Greet {name}, who works on {project}, in one sentence."


def fail(response: httpx.Response) -> None:
    """Print the collector's error body and stop."""
    try:
        error = response.json()["error"]
        print(f"error {response.status_code} {error['code']}: {error['message']}", file=sys.stderr)
    except (ValueError, KeyError):
        print(f"error {response.status_code}: {response.text}", file=sys.stderr)
    sys.exit(1)


def ensure_prompt(client: httpx.Client, model: str) -> int:
    """Create the prompt, or give the existing one a new version; return its version."""
    fields = {"template": TEMPLATE, "model": model, "parameters": {"max_tokens": 100}}
    response = client.post("/v1/prompts", json={"name": PROMPT, **fields})
    if response.status_code == 409:
        response = client.patch(f"/v1/prompts/{PROMPT}", json=fields)
    if response.status_code not in (200, 201):
        fail(response)
    version: int = response.json()["data"]["version"]
    return version


def run_whole(client: httpx.Client, variables: dict[str, str]) -> dict[str, Any]:
    """Run the newest version and return the run result."""
    response = client.post(
        f"/v1/prompts/{PROMPT}/run",
        json={"variables": variables, "metadata": {"source": "examples/run_prompt.py"}},
    )
    if response.status_code != 200:
        fail(response)
    result: dict[str, Any] = response.json()["data"]
    return result


def run_streamed(client: httpx.Client, variables: dict[str, str]) -> None:
    """Run it again as a stream, printing each piece as it arrives."""
    body = {"variables": variables, "stream": True}
    with client.stream("POST", f"/v1/prompts/{PROMPT}/run", json=body) as response:
        if response.status_code != 200:
            response.read()
            fail(response)
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "start":
                print(f"[stream {event['request_id']}]")
            elif event["type"] == "chunk":
                print(event["content"], end="", flush=True)
            elif event["type"] == "end":
                print(f"\n[end: {event['usage']['total_tokens']} tokens]")
            elif event["type"] == "error":
                print(f"\n[error: {event['error']['message']}]", file=sys.stderr)
                sys.exit(1)


def main() -> None:
    """Create, run, stream, and read the run's record back."""
    base_url = os.environ.get("PROMPTRAIL_BASE_URL", "http://127.0.0.1:8000")
    api_key = os.environ.get("PROMPTRAIL_API_KEY")
    if not api_key:
        sys.exit("set PROMPTRAIL_API_KEY to a collector key (make run prints one)")
    model = os.environ.get("PROMPTRAIL_EXAMPLE_MODEL", "gpt-4o-mini")
    headers = {"Authorization": f"Bearer {api_key}"}
    variables = {"name": "Ada", "project": "the analytical engine"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        version = ensure_prompt(client, model)
        print(f"prompt {PROMPT!r} version {version} on {model}")

        result = run_whole(client, variables)
        usage = result["usage"]
        print(f"\n{result['output']}")
        print(
            f"[{result['id']}: {usage['prompt_tokens']} + {usage['completion_tokens']} tokens, "
            f"${usage['estimated_cost_usd']:.6f}, {result['latency_ms']} ms]\n"
        )

        run_streamed(client, variables)

        record = client.get(f"/v1/requests/{result['id']}").json()["data"]
        print(f"\nlogged: {record['id']} status={record['status']} input={record['input']}")


if __name__ == "__main__":
    main()
