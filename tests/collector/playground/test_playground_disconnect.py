"""A client that leaves a streamed playground run stops its cells' upstream calls, and each
cell's record says so."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from promptrail.testing import OpenAIStub
from tests.collector.playground.steps import PATH
from tests.keys import DEFAULT_AUTH


def _records(client: httpx.Client, run_id: str, count: int) -> list[dict[str, Any]]:
    """The run's records, once ``count`` are stored (written after the client left)."""
    params = {"environment": "promptrail-playground", "metadata.playground_run_id": run_id}
    deadline = time.monotonic() + 10
    while True:
        found: list[dict[str, Any]] = client.get("/v1/requests", params=params).json()["data"]
        if len(found) >= count or time.monotonic() > deadline:
            return [client.get(f"/v1/requests/{r['id']}").json()["data"] for r in found]
        time.sleep(0.05)


def test_a_client_that_leaves_a_streamed_run_stops_its_cells(
    runs_url: str, openai_stub: OpenAIStub
) -> None:
    openai_stub.script.reply = " ".join(f"word{i}" for i in range(40))
    openai_stub.script.chunk_delay = 0.1
    body = {
        "prompt": {"template": "Go on.", "model": "gpt-4o-mini"},
        "repetitions": 2,
        "stream": True,
    }
    with httpx.Client(base_url=runs_url, headers=DEFAULT_AUTH, timeout=30) as client:
        with client.stream("POST", PATH, json=body) as response:
            lines = response.iter_lines()
            start = json.loads(next(line for line in lines if line).removeprefix("data: "))
            first = json.loads(next(line for line in lines if line).removeprefix("data: "))
        # Leaving the block closed the connection after the first chunk.
        assert start["type"] == "start" and first["type"] == "chunk"
        assert openai_stub.streams_cancelled.wait(timeout=10), "upstream streams kept running"
        records = _records(client, start["id"], 2)
    assert openai_stub.streams_completed == 0
    assert len(records) == 2
    for stored in records:
        assert stored["status"] == "error" and "disconnected" in stored["error"]
        assert stored["metadata"]["source"] == "playground"
