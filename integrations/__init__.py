"""Provider patches and OpenTelemetry glue (shipped as ``promptrail.integrations``).

``instrument()`` patches every installed provider SDK; ``instrument("openai")`` just one.
Both are idempotent; ``uninstrument()`` restores the original methods.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from . import _patching

logger = logging.getLogger("promptrail")

PROVIDERS = ("openai", "anthropic")


def _module(name: str) -> ModuleType:
    if name not in PROVIDERS:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
    return importlib.import_module(f"{__name__}.{name}")


def _installed(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def instrument(*providers: str) -> list[str]:
    """Patch the given provider SDKs (default: every installed one); return those patched."""
    names = providers or tuple(p for p in PROVIDERS if _installed(p))
    done = []
    for name in names:
        if not _installed(name):
            logger.warning("promptrail: %s is not installed; nothing to instrument", name)
            continue
        _patching.apply(_module(name).WRAPPED_METHODS)
        done.append(name)
    return done


def uninstrument(*providers: str) -> None:
    """Restore the original methods of the given providers (default: all)."""
    for name in providers or PROVIDERS:
        if _installed(name):
            _patching.remove(_module(name).WRAPPED_METHODS)
