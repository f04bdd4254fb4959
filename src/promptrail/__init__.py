"""promptrail: a prompt registry and LLM request log for Python teams.

The SDK half (capture, shipping, REST client) lands in later releases; today the package
ships the collector service, started with ``promptrail serve``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
