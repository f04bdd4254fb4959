"""The server's process-wide memory settings: raised, never lowered, and never on import."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from promptrail.collector.tuning import collect_cycles_less_often


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_importing_the_collector_leaves_the_garbage_collector_alone() -> None:
    import promptrail.collector.app  # noqa: F401

    # Only `promptrail serve` tunes the process; a test or library user keeps the defaults.
    assert gc.get_threshold()[0] < 50_000


def test_cycle_collection_thresholds_are_raised_but_never_lowered(thresholds: None) -> None:
    gc.set_threshold(700, 10, 10)
    collect_cycles_less_often()
    assert gc.get_threshold() == (50_000, 20, 20)

    gc.set_threshold(100_000, 50, 50)
    collect_cycles_less_often()
    assert gc.get_threshold() == (100_000, 50, 50)
