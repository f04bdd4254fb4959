"""Cached, cache-write and reasoning tokens (issue 35 point 4): the patched official SDKs
capture them, whole and streamed, and the stored record carries them and is priced by them.

The stubs answer with the usage details where and as the real APIs put them, so the SDKs'
own pydantic objects are what the patches read. The prompt_tokens rule (docs/api-notes.md):
OpenAI's ``prompt_tokens`` already hold the cached tokens; Anthropic's ``input_tokens`` leave
the cache's reads and writes out, and the record's ``prompt_tokens`` add them back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import promptrail
from promptrail.testing import AnthropicStub, OpenAIStub, serve
from tests.capture import Records
from tests.integrations.openai_payloads import RESPONSE
from tests.keys import DEFAULT_KEY
from tests.prices import priced_with_details
from tests.provider_clients import anthropic_client, openai_client

MESSAGES = [{"role": "user", "content": "Summarise the long cached document"}]
OPENAI_MODEL = "o3-mini"
ANTHROPIC_MODEL = "claude-3-5-sonnet-latest"


def assert_priced_by_its_details(record: dict[str, Any]) -> None:
    """The record's cost is genai-prices' for its counts, not the cost without the details."""
    at = datetime.fromisoformat(record["created_at"].replace("Z", "+00:00"))
    with_details, without = priced_with_details(record["model"], record["usage"], at)
    assert record["cost_known"] is True
    assert record["usage"]["estimated_cost_usd"] == pytest.approx(with_details)
    assert with_details != pytest.approx(without)


def openai_details(stub: OpenAIStub) -> None:
    stub.reset()
    stub.script.cached_tokens = 1_536
    stub.script.reasoning_tokens = 448


def test_openai_chat_completion_details(
    openai_stub: OpenAIStub, records: Records, capture: str
) -> None:
    openai_details(openai_stub)

    completion = openai_client(openai_stub).chat.completions.create(
        model=OPENAI_MODEL, messages=MESSAGES
    )

    usage = completion.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert usage.completion_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 1_536
    assert usage.completion_tokens_details.reasoning_tokens == 448
    (record,) = records()
    stored = record["usage"]
    # OpenAI's prompt_tokens hold the cached ones: stored as sent.
    assert (stored["prompt_tokens"], stored["completion_tokens"]) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert (stored["cached_tokens"], stored["cache_write_tokens"], stored["reasoning_tokens"]) == (
        1_536,
        0,
        448,
    )
    assert_priced_by_its_details(record)
    # The SDK's client reads them off the detail, typed.
    with promptrail.Client(DEFAULT_KEY, capture) as client:
        read = client.requests.get(record["id"]).usage
    assert (read.cached_tokens, read.cache_write_tokens, read.reasoning_tokens) == (1_536, 0, 448)


def test_openai_stream_details_come_with_the_usage_chunk(
    openai_stub: OpenAIStub, records: Records
) -> None:
    openai_details(openai_stub)

    stream = openai_client(openai_stub).chat.completions.create(
        model=OPENAI_MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    usage = chunks[-1].usage
    assert usage is not None
    (record,) = records()
    stored = record["usage"]
    assert (stored["prompt_tokens"], stored["completion_tokens"]) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert (stored["cached_tokens"], stored["reasoning_tokens"]) == (1_536, 448)
    assert_priced_by_its_details(record)


def test_openai_without_details_stores_zero(openai_stub: OpenAIStub, records: Records) -> None:
    openai_stub.reset()

    openai_client(openai_stub).chat.completions.create(model=OPENAI_MODEL, messages=MESSAGES)

    (record,) = records()
    details = ("cached_tokens", "cache_write_tokens", "reasoning_tokens")
    assert {k: record["usage"][k] for k in details} == dict.fromkeys(details, 0)


def anthropic_details(stub: AnthropicStub) -> None:
    stub.reset()
    stub.script.cached_tokens = 4_096
    stub.script.cache_write_tokens = 2_048


def assert_anthropic_record(record: dict[str, Any], input_tokens: int, output_tokens: int) -> None:
    stored = record["usage"]
    # Anthropic's input_tokens leave the cache out: the record's prompt is all of it.
    assert stored["prompt_tokens"] == input_tokens + 4_096 + 2_048
    assert stored["completion_tokens"] == output_tokens
    assert (stored["cached_tokens"], stored["cache_write_tokens"]) == (4_096, 2_048)
    assert_priced_by_its_details(record)


def test_anthropic_message_details(anthropic_stub: AnthropicStub, records: Records) -> None:
    anthropic_details(anthropic_stub)

    message = anthropic_client(anthropic_stub).messages.create(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=MESSAGES
    )

    assert message.usage.cache_read_input_tokens == 4_096
    assert message.usage.cache_creation_input_tokens == 2_048
    (record,) = records()
    assert_anthropic_record(record, message.usage.input_tokens, message.usage.output_tokens)


def test_anthropic_stream_details_come_with_message_start(
    anthropic_stub: AnthropicStub, records: Records
) -> None:
    anthropic_details(anthropic_stub)

    stream = anthropic_client(anthropic_stub).messages.create(
        model=ANTHROPIC_MODEL, max_tokens=100, messages=MESSAGES, stream=True
    )
    events = list(stream)

    start = events[0]
    assert start.type == "message_start"
    assert start.message.usage.cache_read_input_tokens == 4_096
    delta = [e for e in events if e.type == "message_delta"][-1]
    (record,) = records()
    assert_anthropic_record(record, start.message.usage.input_tokens, delta.usage.output_tokens)


def test_anthropic_stream_helper_and_thinking_tokens(
    anthropic_stub: AnthropicStub, records: Records
) -> None:
    anthropic_details(anthropic_stub)
    anthropic_stub.script.reasoning_tokens = 300

    with anthropic_client(anthropic_stub).messages.stream(
        model=ANTHROPIC_MODEL, max_tokens=1_000, messages=MESSAGES
    ) as stream:
        final = stream.get_final_message()

    assert final.usage.output_tokens_details is not None
    assert final.usage.output_tokens_details.thinking_tokens == 300
    (record,) = records()
    assert record["usage"]["reasoning_tokens"] == 300
    assert_anthropic_record(record, final.usage.input_tokens, final.usage.output_tokens)


def test_responses_api_details(records: Records) -> None:
    """The Responses API names them input_tokens_details / output_tokens_details."""
    answer = {
        **RESPONSE,
        "model": OPENAI_MODEL,
        "usage": {
            "input_tokens": 3_000,
            "input_tokens_details": {"cached_tokens": 2_048},
            "output_tokens": 900,
            "output_tokens_details": {"reasoning_tokens": 768},
            "total_tokens": 3_900,
        },
    }

    async def responses(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse(answer)

    app = Starlette(routes=[Route("/v1/responses", responses, methods=["POST"])])
    with (
        serve(app, lifespan="off") as url,
        openai.OpenAI(api_key="k", base_url=f"{url}/v1", max_retries=0) as api,
    ):
        response = api.responses.create(model=OPENAI_MODEL, input="Summarise it")

    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 2_048
    (record,) = records()
    stored = record["usage"]
    assert (stored["prompt_tokens"], stored["completion_tokens"]) == (3_000, 900)
    assert (stored["cached_tokens"], stored["reasoning_tokens"]) == (2_048, 768)
    assert_priced_by_its_details(record)
