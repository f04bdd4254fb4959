"""What both stubs share, from the package (one copy: ``promptrail stub-provider``)."""

from promptrail.collector.stub_provider.base import Call, Script, StreamBroken, StubProvider

__all__ = ["Call", "Script", "StreamBroken", "StubProvider"]
