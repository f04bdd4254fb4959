"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import context as otel_context

from tests.provider_clients import close_opened


@pytest.fixture(autouse=True)
def _close_provider_clients() -> Iterator[None]:
    yield
    close_opened()


@pytest.fixture(autouse=True)
def _own_otel_context() -> Iterator[None]:
    """Each test starts from the context the one before it started from.

    A LlamaIndex stream leaves its stand-in parent span current in its caller's context, by
    design (integrations/llamaindex.py, ``_StreamParent``), and a test's caller is the worker's
    thread: without this, the next test of the thread (the LangChain ones assert that nothing
    is current after a run) would start inside it.
    """
    before = otel_context.get_current()
    yield
    otel_context.attach(before)
