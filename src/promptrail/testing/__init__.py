"""Test doubles for code that calls model providers: OpenAI and Anthropic on a local socket.

The stubs speak each provider's exact wire format, so the real ``openai`` and ``anthropic``
SDKs (and promptrail's capture of them) run unchanged against them: OpenAI chat completions at
``<url>/v1/chat/completions`` and Anthropic messages at ``<url>/v1/messages``, whole or
streamed. They answer every request with the scripted reply (or, with ``script.replies =
Replies(...)``, from the request: rules on the last user message, else an echo of it), count
words as tokens and accept any API key; a test scripts failures and delays (:class:`Script`)
and reads what was sent (``stub.calls``). ``promptrail stub-provider`` serves both on one port
for examples and demos, answering with :class:`Replies` (an echo by default).
Needs the collector's extra (``pip install 'promptrail[collector]'``: starlette and uvicorn)::

    from promptrail.testing import OpenAIStub, serve_stub

    with serve_stub(OpenAIStub()) as stub:
        stub.script.reply = "Paris."
        client = openai.OpenAI(base_url=f"{stub.url}/v1", api_key="sk-test")
        ...
        assert stub.calls[-1].body["model"] == "gpt-4o-mini"
"""

from __future__ import annotations

from ._anthropic import AnthropicStub
from ._openai import OpenAIStub
from ._replies import ECHO_PREFIX, Replies, ReplyRule, ToolCallReply
from ._server import both, free_port, serve, serve_stub
from ._stub import FIXED_REPLY, KEPT_CALLS, Call, Script, StreamBroken, StubProvider

__all__ = [
    "ECHO_PREFIX",
    "FIXED_REPLY",
    "KEPT_CALLS",
    "AnthropicStub",
    "Call",
    "OpenAIStub",
    "Replies",
    "ReplyRule",
    "Script",
    "StreamBroken",
    "StubProvider",
    "ToolCallReply",
    "both",
    "free_port",
    "serve",
    "serve_stub",
]
