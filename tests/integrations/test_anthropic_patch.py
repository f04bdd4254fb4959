"""The real ``anthropic`` SDK, patched, against a wire-format stub."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

from promptrail.testing import AnthropicStub
from tests.capture import Records
from tests.provider_clients import anthropic_client

MESSAGES = [{"role": "user", "content": "Greet the tester"}]


def test_messages_create_is_recorded(anthropic_stub: AnthropicStub, records: Records) -> None:
    anthropic_stub.reset()

    message = anthropic_client(anthropic_stub).messages.create(
        model="claude-stub-model", max_tokens=100, system="Be kind.", messages=MESSAGES
    )

    (record,) = records()
    assert record["provider"] == "anthropic"
    assert record["model"] == message.model
    assert record["kind"] == "llm"
    assert record["input"] == {"system": "Be kind.", "messages": MESSAGES}
    assert record["output"]["content"] == anthropic_stub.script.reply
    assert record["output"]["finish_reason"] == message.stop_reason
    assert record["usage"]["prompt_tokens"] == message.usage.input_tokens
    assert record["usage"]["completion_tokens"] == message.usage.output_tokens


def test_create_with_stream_true(anthropic_stub: AnthropicStub, records: Records) -> None:
    anthropic_stub.reset()

    stream = anthropic_client(anthropic_stub).messages.create(
        model="claude-stub-model", max_tokens=100, messages=MESSAGES, stream=True
    )
    assert isinstance(stream, anthropic.Stream)
    text = "".join(
        e.delta.text
        for e in stream
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )

    (record,) = records()
    assert text == anthropic_stub.script.reply
    assert record["output"]["content"] == text
    assert record["usage"]["completion_tokens"] > 0


def test_messages_stream_helper_keeps_its_helpers(
    anthropic_stub: AnthropicStub, records: Records
) -> None:
    anthropic_stub.reset()

    with anthropic_client(anthropic_stub).messages.stream(
        model="claude-stub-model", max_tokens=100, messages=MESSAGES
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()

    (record,) = records()
    assert text == anthropic_stub.script.reply
    assert final.content[0].text == text  # type: ignore[union-attr]
    assert record["output"]["content"] == text
    assert record["usage"]["completion_tokens"] == final.usage.output_tokens


def test_async_create_and_errors(anthropic_stub: AnthropicStub, records: Records) -> None:
    anthropic_stub.reset()
    anthropic_stub.script.failures = [529]

    async def run() -> None:
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=anthropic_stub.url, max_retries=0
        ) as api:
            with pytest.raises(anthropic.APIStatusError):
                await api.messages.create(model="claude-x", max_tokens=10, messages=MESSAGES)
            await api.messages.create(model="claude-x", max_tokens=10, messages=MESSAGES)

    asyncio.run(run())

    recorded = records(expected=2)
    assert sorted(r["status"] for r in recorded) == ["error", "success"]
