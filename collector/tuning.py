"""Process-wide memory settings for a collector serving heavy ingest.

They change the whole process (the garbage collector, glibc's allocator), so only the
``promptrail serve`` entry point applies them, never a library import or a test.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys

logger = logging.getLogger("promptrail.collector")

# glibc's mallopt parameters (malloc.h).
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def tune_for_ingest() -> None:
    """Apply the settings below; call it before the embedded store is first opened."""
    collect_cycles_less_often()
    map_big_buffers_apart()
    return_engine_memory_sooner()


def collect_cycles_less_often() -> None:
    """Raise the cyclic garbage collector's thresholds (never lowers them).

    A batch of 5,000 records allocates some 50,000 dicts and models that live until it is
    stored, so with the default thresholds (700, 10, 10) the collector ran dozens of times
    per batch and walked every live batch again in full collections: a sixth of the
    collector's CPU at full ingest. Batches make no reference cycles, and garbage from
    elsewhere waits at most 50,000 allocations longer.
    """
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, 50_000), max(gen1, 20), max(gen2, 20))


def map_big_buffers_apart() -> None:
    """Have glibc serve allocations of 4 MiB and more by mmap, always (Linux only).

    A batch passes through buffers of 5-20 MiB (the inflated body, its encoded rows). By
    default glibc raises its mmap threshold to the size of such a buffer once one is freed,
    after which they come from per-thread heaps that keep the pages: the collector's memory
    then grew past its 1 GiB target over a million records. A fixed threshold and two arenas
    hold it under the target at the same ingest rate (figures: docs/benchmarks.md).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, 4 << 20)
    mallopt(_M_ARENA_MAX, 2)


def return_engine_memory_sooner() -> None:
    """Have the embedded engine's allocator hand freed pages back within a second.

    The chDB engine allocates with its own jemalloc, which keeps freed pages for reuse for
    5 s by default. Inserts and merges free hundreds of MiB at a time, so at full ingest
    a large share of the collector's memory was pages already freed. jemalloc reads its
    options once, when the engine loads, from ``JE_MALLOC_CONF`` (a value already set
    wins). Returning them at once cost much more CPU at full ingest; after 1 s, nothing
    measurable.
    """
    if "chdb" in sys.modules:
        logger.warning("the embedded engine is already loaded: its allocator keeps its options")
        return
    os.environ.setdefault("JE_MALLOC_CONF", "dirty_decay_ms:1000")
