"""OpenLLMetry's OpenAI instrumentation for a test, taken off again whole afterwards."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import openai.resources
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider


def _openai_methods() -> dict[tuple[type, str], Any]:
    """Every method of the openai package's resource classes, as defined now."""
    found: dict[tuple[type, str], Any] = {}
    for info in pkgutil.walk_packages(openai.resources.__path__, "openai.resources."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__:
                for name, value in vars(cls).items():
                    if callable(value):
                        found[(cls, name)] = value
    return found


@contextmanager
def openllmetry_instrumented(provider: TracerProvider) -> Iterator[None]:
    """OpenLLMetry instruments the openai client with ``provider`` until the block ends.

    Its ``uninstrument`` leaves its wrappers on the openai 3.x client's methods, so a later
    test's calls would still make spans on this (by then shut-down) provider: the methods
    are put back as they were before.
    """
    before = _openai_methods()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        for (cls, name), method in before.items():
            if vars(cls).get(name) is not method:
                setattr(cls, name, method)
