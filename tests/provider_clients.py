"""The real provider SDKs' clients of the wire stubs; every one made is closed after its test.

``tests/integrations/conftest.py`` closes them, so no connection outlives the test that made it.
The SDKs are imported by the first client made: that conftest imports this module in every test
worker, and one that makes no client need not pay for them (docs/architecture.md, "Tests").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from promptrail.testing import AnthropicStub, OpenAIStub

if TYPE_CHECKING:
    import anthropic
    import openai

_opened: list[openai.OpenAI | anthropic.Anthropic] = []


def openai_client(stub: OpenAIStub) -> openai.OpenAI:
    """An ``openai.OpenAI`` of the stub, without retries."""
    import openai

    made = openai.OpenAI(api_key="sk-test", base_url=f"{stub.url}/v1", max_retries=0)
    _opened.append(made)
    return made


def openai_answering(
    content: bytes | Iterator[bytes], content_type: str = "text/event-stream"
) -> openai.OpenAI:
    """An ``openai.OpenAI`` answered in process, without retries: each request gets a 200 with
    ``content`` (an event stream by default) from its HTTP client's own transport, no socket."""
    import httpx2
    import openai

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=content, headers={"content-type": content_type})

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://provider.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


def anthropic_client(stub: AnthropicStub) -> anthropic.Anthropic:
    """An ``anthropic.Anthropic`` of the stub, without retries."""
    import anthropic

    made = anthropic.Anthropic(api_key="sk-ant-test", base_url=stub.url, max_retries=0)
    _opened.append(made)
    return made


def close_opened() -> None:
    """Close every client made since the last call."""
    while _opened:
        _opened.pop().close()
