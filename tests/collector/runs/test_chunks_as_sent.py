"""A streamed run relays each of the provider's events as a chunk of its own, also when many
arrive in one read of the provider's body (as when the answer was ready before its first
byte): the collector hands a read's events on together, never joined into one chunk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.testing import serve
from tests.keys import DEFAULT_AUTH, OPENAI_KEY

WORDS = ["One", " two", " three", " four", " five", " six"]


def _body() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    payloads: list[Any] = [chunk({"role": "assistant", "content": ""})]
    payloads += [chunk({"content": word}) for word in WORDS]
    payloads.append(chunk({}, "stop"))
    payloads.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}})
    events = [f"data: {json.dumps(p)}\n\n".encode() for p in payloads]
    return b"".join(events) + b"data: [DONE]\n\n"


async def _all_at_once(scope: Scope, receive: Receive, send: Send) -> None:
    """An OpenAI stream sent in one piece: the collector reads it in one read."""
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _body()})


@pytest.fixture
def collector_url(settings: Settings) -> Iterator[str]:
    with serve(_all_at_once, lifespan="off") as provider:
        ready = settings.model_copy(
            update={
                "openai_base_url": f"{provider}/v1",
                "openai_api_key": SecretStr(OPENAI_KEY),
            }
        )
        with serve(create_app(ready)) as url:
            yield url


def _events(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", f"{url}{path}", json={**body, "stream": True}, headers=DEFAULT_AUTH, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]


def test_a_prompt_run_relays_each_event_of_one_read_as_its_own_chunk(collector_url: str) -> None:
    created = httpx.post(
        f"{collector_url}/v1/prompts",
        json={"name": "count", "template": "Count to six.", "model": "gpt-4o-mini"},
        headers=DEFAULT_AUTH,
    )
    assert created.status_code == 201, created.text
    events = _events(collector_url, "/v1/prompts/count/run", {"variables": {}})
    assert [e["content"] for e in events if e["type"] == "chunk"] == WORDS
    assert events[-1]["type"] == "end"


def test_a_playground_cell_relays_each_event_of_one_read_as_its_own_chunk(
    collector_url: str,
) -> None:
    body = {"prompt": {"template": "Count to six.", "model": "gpt-4o-mini"}}
    events = _events(collector_url, "/v1/playground/runs", body)
    assert [e["delta"] for e in events if e["type"] == "chunk"] == WORDS
    end = next(e for e in events if e["type"] == "end")
    assert end["output"] == "".join(WORDS) and end["status"] == "success"
