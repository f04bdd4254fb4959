"""The server's process-wide memory settings: raised, never lowered, and never on import."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptrail.collector.tuning import collect_cycles_less_often, return_engine_memory_sooner
from tests.collector.engines import run_script


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


# Opens an embedded store after tuning and prints the engine allocator's decay option.
_ENGINE_DECAY = """
import sys, clickhouse_connect
from promptrail.collector.tuning import tune_for_ingest
tune_for_ingest()
client = clickhouse_connect.get_client(dsn="chdb://" + sys.argv[1])
stats = client.query("SELECT * FROM system.jemalloc_stats").result_rows[0][0]
print([line.strip() for line in stats.splitlines() if "opt.dirty_decay_ms" in line][0])
"""


def engine_decay(data_path: Path, environ: dict[str, str]) -> str:
    return run_script(_ENGINE_DECAY, str(data_path), env=environ)


def test_the_engine_returns_freed_memory_within_a_second(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "JE_MALLOC_CONF"}
    # Left to itself the engine keeps freed pages 5 s: hundreds of MiB at full ingest.
    assert engine_decay(tmp_path / "a", {**environ, "JE_MALLOC_CONF": ""}).startswith(
        "opt.dirty_decay_ms: 5000"
    )
    assert engine_decay(tmp_path / "b", environ).startswith("opt.dirty_decay_ms: 1000")
    # An operator's own allocator options win.
    mine = {**environ, "JE_MALLOC_CONF": "dirty_decay_ms:250"}
    assert engine_decay(tmp_path / "c", mine).startswith("opt.dirty_decay_ms: 250")


def test_allocator_options_are_left_alone_once_the_engine_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chdb  # noqa: F401  (this process's engine, as any test's store loads it)

    monkeypatch.delenv("JE_MALLOC_CONF", raising=False)
    return_engine_memory_sooner()
    # Too late to take effect: setting it would only mislead a later reader of the variable.
    assert "JE_MALLOC_CONF" not in os.environ
