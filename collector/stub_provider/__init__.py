"""Local stand-ins for model providers, speaking each provider's exact wire format.

``promptrail stub-provider`` serves both on one port, so examples and demos run without
provider access (a laptop offline, a CI runner, a sandbox): OpenAI chat completions at
``<url>/v1/chat/completions`` and Anthropic messages at ``<url>/v1/messages``, whole or streamed.
They answer every request with the same scripted reply and count words as tokens; any API key
is accepted. The tests drive the same stubs, scripting failures and delays (:class:`Script`).
"""

from __future__ import annotations

from starlette.applications import Starlette

from .anthropic import AnthropicStub
from .base import Script, StubProvider
from .openai import OpenAIStub

__all__ = ["AnthropicStub", "OpenAIStub", "Script", "StubProvider", "both"]


def both(openai: OpenAIStub, anthropic: AnthropicStub) -> Starlette:
    """Return one app serving both stubs (their paths do not overlap)."""
    return Starlette(routes=[*openai.app.routes, *anthropic.app.routes])
