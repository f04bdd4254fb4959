"""The template payload for local execution (spec 2.3, CONTRACT 4)."""

from __future__ import annotations

import uuid

from ...models.prompts import TemplateOut, VariableSpec
from ...store.prompts import PromptVersionRow
from .model_routing import provider_for
from .templating import template_variables, to_double_brace


def template_payload(row: PromptVersionRow) -> TemplateOut:
    """Shape a version as the double-brace payload a client renders itself.

    A model name the routing rules do not know is served as ``openai``: the OpenAI wire
    format is what every OpenAI-compatible server (vLLM, Ollama, llama.cpp) speaks.
    """
    provider, model = provider_for(row.model) or ("openai", row.model)
    temperature = row.parameters.get("temperature")
    max_tokens = row.parameters.get("max_tokens")
    return TemplateOut(
        prompt_id=str(uuid.UUID(hex=row.prompt_id)),
        prompt_name=row.name,
        version=row.version,
        version_id=row.version_id,
        content=to_double_brace(row.template),
        variables={name: VariableSpec(type="string") for name in template_variables(row.template)},
        provider=provider,
        model=model,
        temperature=float(temperature) if temperature is not None else None,
        max_tokens=int(max_tokens) if max_tokens is not None else None,
    )
