"""The Anthropic stub, from the package (one copy: ``promptrail stub-provider`` serves it too)."""

from promptrail.collector.stub_provider.anthropic import AnthropicStub

__all__ = ["AnthropicStub"]
