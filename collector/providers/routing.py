"""Model routing: which provider serves a model name, and under which name.

``openai/<m>`` and ``anthropic/<m>`` name the provider explicitly; otherwise names starting
``gpt-``, ``o1``, ``o3``, ``o4`` or ``chatgpt-`` go to OpenAI and ``claude-`` to Anthropic.
Runs, experiments and the template payload all route by these rules (docs/api-notes.md,
"Runs").
"""

from __future__ import annotations

from typing import Literal

ProviderName = Literal["openai", "anthropic"]

_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-")


def provider_for(model: str) -> tuple[ProviderName, str] | None:
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
