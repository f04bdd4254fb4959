"""Steps for runs: create a prompt, run it whole or streamed, read the stream's events."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi.testclient import TestClient


def create_prompt(api: httpx.Client, **fields: Any) -> dict[str, Any]:
    """Create the ``greet`` prompt (``fields`` over its defaults); its data."""
    body = {
        "name": "greet",
        "template": "Say hello to {name}.",
        "model": "gpt-4o-mini",
        "parameters": {"temperature": 0.2, "max_tokens": 100},
        **fields,
    }
    response = api.post("/v1/prompts", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def run(api: TestClient, path: str = "/v1/prompts/greet/run", **body: Any) -> dict[str, Any]:
    """Run a stored prompt whole; the run's data."""
    response = api.post(path, json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def parse_events(text: str) -> list[dict[str, Any]]:
    """Split an event stream into its JSON events; every line must be a data line."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        assert all(line.startswith("data: ") for line in lines), block
        events.append(json.loads("".join(line.removeprefix("data: ") for line in lines)))
    return events


def stream(
    api: TestClient, path: str = "/v1/prompts/greet/run", **body: Any
) -> list[dict[str, Any]]:
    """Run a stored prompt streamed; the stream's events."""
    response = api.post(path, json={**body, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_events(response.text)
