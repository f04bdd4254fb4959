"""The OpenAI stub, from the package (one copy: ``promptrail stub-provider`` serves it too)."""

from promptrail.collector.stub_provider.openai import OpenAIStub

__all__ = ["OpenAIStub"]
