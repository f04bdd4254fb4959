"""A streamed playground run: ``start`` with the cells, each cell's chunks and ``end`` (the
finished cell's fields) interleaved as they arrive, then ``done``; the stream's cells are
the whole answer's."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from promptrail.testing import AnthropicStub, OpenAIStub, Replies
from tests.collector.playground.steps import PATH, record
from tests.collector.runs.steps import parse_events

CELL_FIELDS = {
    "cell",
    "model",
    "repetition",
    "request_id",
    "output",
    "usage",
    "latency_ms",
    "time_to_first_token_ms",
    "estimated_cost_usd",
    "cost_known",
    "status",
}


def _stream(api: TestClient, **body: Any) -> list[dict[str, Any]]:
    response = api.post(PATH, json={**body, "stream": True})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_events(response.text)


def test_a_streamed_run_interleaves_its_cells_and_ends_each_with_its_fields(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    openai_stub.script.replies = Replies()
    anthropic_stub.script.replies = Replies()
    # Slow words: every cell is still streaming when the others start.
    openai_stub.script.chunk_delay = 0.02
    anthropic_stub.script.chunk_delay = 0.02
    events = _stream(
        runs_api,
        prompt={"template": "Tell {name} a long story about the sea.", "model": "gpt-4o-mini"},
        variables={"name": "Ada"},
        models=["gpt-4o-mini", "claude-3-5-haiku-latest"],
        repetitions=2,
    )
    start, *middle, done = events
    assert start["type"] == "start" and start["id"].startswith("pg_")
    assert start["cells"] == [
        {"cell": 0, "model": "gpt-4o-mini", "repetition": 1},
        {"cell": 1, "model": "gpt-4o-mini", "repetition": 2},
        {"cell": 2, "model": "claude-3-5-haiku-latest", "repetition": 1},
        {"cell": 3, "model": "claude-3-5-haiku-latest", "repetition": 2},
    ]
    assert {e["type"] for e in middle} == {"chunk", "end"}
    ends = {e["cell"]: e for e in middle if e["type"] == "end"}
    assert sorted(ends) == [0, 1, 2, 3]
    expected = "Echo: Tell Ada a long story about the sea."
    for cell, end in ends.items():
        assert set(end) >= CELL_FIELDS, end
        assert end["status"] == "success"
        chunks = [e for e in middle if e["type"] == "chunk" and e["cell"] == cell]
        assert len(chunks) > 1
        assert "".join(c["delta"] for c in chunks) == expected == end["output"]
        # A cell's chunks all come before its end.
        assert middle.index(chunks[-1]) < middle.index(end)
        detail = record(runs_api, end["request_id"])
        assert detail["metadata"]["playground_run_id"] == start["id"]
        assert detail["metadata"]["playground_cell"] == cell
        assert end["usage"]["total_tokens"] == detail["usage"]["total_tokens"]
    # Interleaved: a chunk of some cell comes after another cell's first chunk and before
    # that cell's end.
    order = [e["cell"] for e in middle if e["type"] == "chunk"]
    first = order[0]
    last_of_first = len(order) - 1 - order[::-1].index(first)
    assert any(c != first for c in order[:last_of_first])
    assert done == {
        "type": "done",
        "id": start["id"],
        "estimated_cost_usd": start["estimated_cost_usd"],
        "cost_usd": round(sum(e["estimated_cost_usd"] for e in ends.values()), 10),
    }


def test_a_failing_cell_ends_with_its_error_in_the_stream_and_the_others_finish(
    runs_api: TestClient, openai_stub: OpenAIStub, anthropic_stub: AnthropicStub
) -> None:
    anthropic_stub.script.failures = [400]
    events = _stream(
        runs_api,
        prompt={"template": "Hi {name}.", "model": "gpt-4o-mini"},
        variables={"name": "Ada"},
        models=["gpt-4o-mini", "claude-3-5-haiku-latest"],
    )
    ends = {e["cell"]: e for e in events if e["type"] == "end"}
    assert ends[0]["status"] == "success"
    assert ends[1]["status"] == "error" and ends[1]["error"]["code"] == "PROVIDER_ERROR"
    assert events[-1]["type"] == "done"
