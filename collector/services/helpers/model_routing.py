"""Which provider serves a model name (CONTRACT 5)."""

from __future__ import annotations

from typing import Literal

Provider = Literal["openai", "anthropic"]

_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-")


def provider_for(model: str) -> tuple[Provider, str] | None:
    """Return (provider, provider's model name) for ``model``, or None when unknown.

    >>> provider_for("anthropic/claude-sonnet-4")
    ('anthropic', 'claude-sonnet-4')
    """
    prefix, _, rest = model.partition("/")
    if rest and prefix == "openai":
        return "openai", rest
    if rest and prefix == "anthropic":
        return "anthropic", rest
    if model.startswith(_OPENAI_PREFIXES):
        return "openai", model
    if model.startswith("claude-"):
        return "anthropic", model
    return None
