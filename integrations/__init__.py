"""Provider patches, framework integrations and web middleware (``promptrail.integrations``).

``instrument()`` patches every installed provider SDK and hooks into every installed
framework (LangChain); ``instrument("openai")`` just one. Both are idempotent;
``uninstrument()`` restores the original methods. A framework module is imported only when
its framework is installed, so ``pip install promptrail`` pulls in none of them.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from . import _patching

logger = logging.getLogger("promptrail")

PROVIDERS = ("openai", "anthropic")
# name -> the package whose presence turns it on; each module has instrument()/uninstrument()
FRAMEWORKS = {
    "langchain": "langchain_core",
    "llamaindex": "llama_index_instrumentation",
    "pydantic_ai": "pydantic_ai",
}


def _module(name: str) -> ModuleType:
    if name not in PROVIDERS and name not in FRAMEWORKS:
        known = ", ".join((*PROVIDERS, *FRAMEWORKS))
        raise ValueError(f"unknown provider or framework {name!r}; known: {known}")
    return importlib.import_module(f"{__name__}.{name}")


def _installed(name: str) -> bool:
    try:
        importlib.import_module(FRAMEWORKS.get(name, name))
    except ImportError:
        return False
    return True


def instrument(*providers: str) -> list[str]:
    """Patch the given provider SDKs and frameworks (default: every installed one).

    Return the names instrumented.
    """
    names = providers or tuple(p for p in (*PROVIDERS, *FRAMEWORKS) if _installed(p))
    done = []
    for name in names:
        if not _installed(name):
            logger.warning("promptrail: %s is not installed; nothing to instrument", name)
            continue
        _switch(name, on=True)
        done.append(name)
    return done


def uninstrument(*providers: str) -> None:
    """Restore the original methods of the given providers and frameworks (default: all)."""
    for name in providers or (*PROVIDERS, *FRAMEWORKS):
        if _installed(name):
            _switch(name, on=False)


def _switch(name: str, on: bool) -> None:
    """Patch (or unpatch) a provider's methods; hook into (or out of) a framework."""
    module = _module(name)
    if name in FRAMEWORKS:
        module.instrument() if on else module.uninstrument()
    elif on:
        _patching.apply(module.WRAPPED_METHODS)
    else:
        _patching.remove(module.WRAPPED_METHODS)
