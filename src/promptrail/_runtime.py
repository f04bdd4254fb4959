"""Capture's entry points: init, the tracer, flush, shutdown and the counters.

``init`` resolves its arguments and the environment (``_settings.py``) and has
``_capture/pipelines.py`` build the pipelines (tracer, shipper, sender, disk spool: the
record's path, ``_capture/__init__.py``); this module holds the one live pipeline and answers
``flush``, ``shutdown`` and ``stats`` from it.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from ._capture.pipelines import Pipeline, PipelineOptions, build
from ._capture.send import DEFAULT_MAX_PENDING_BYTES, Mask
from ._capture.shipping import Shipper
from ._capture.spool import DEFAULT_SPOOL_MAX_AGE, spool_bound
from ._capture.stats import CaptureStats
from ._disk import remember_cache_dir, resolve_cache_dir
from ._settings import api_key_or_environment, byte_setting, current, environment_setting

_SHUTDOWN_TIMEOUT = 3.0

_lock = threading.RLock()
_pipeline: Pipeline | None = None
_stats = CaptureStats()
_score_stats = CaptureStats()  # scores are counted apart: stats()["scores"]
_atexit_registered = False


def init(
    api_key: str | None = None,
    base_url: str | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
    enabled: bool = True,
    sample_rate: float = 1.0,
    mask: Mask | None = None,
    max_queue_bytes: int | None = None,
    max_queue_size: int = 10_000,
    flush_interval: float = 1.0,
    export_timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    spool_max_bytes: int | None = None,
    spool_max_age: float = DEFAULT_SPOOL_MAX_AGE,
    environment: str | None = None,
) -> None:
    """Start capturing: records go to ``base_url`` (``PROMPTRAIL_BASE_URL``) with ``api_key``.

    ``tracer_provider``: join that SDK provider (promptrail's spans then reach its other
    processors too) instead of using promptrail's own light spans. ``sample_rate``: the
    share of traces kept. ``mask``: applied to every record before it leaves the process.
    ``enabled=False`` captures nothing. ``max_queue_bytes``: the memory records may take
    while they wait to be shipped (``PROMPTRAIL_MAX_QUEUE_BYTES``, default 64 MiB); past it,
    new records are dropped and counted. ``max_queue_size``: with ``tracer_provider``, the
    length of its BatchSpanProcessor's queue. ``transport``: an httpx transport for shipping
    (proxies, tests, benchmarks). ``cache_dir``: where records the collector could not take
    are kept (and templates' last good copies; ``PROMPTRAIL_CACHE_DIR``, default the user's
    cache directory + ``/promptrail``; ``PROMPTRAIL_DISK_CACHE=0``: memory only), at most
    ``spool_max_bytes`` (``PROMPTRAIL_SPOOL_MAX_BYTES``, default 256 MiB) for at most
    ``spool_max_age`` seconds (default 7 days); docs/sdk.md, "Outages". ``environment``:
    where every captured record is logged (``PROMPTRAIL_ENVIRONMENT``, default
    ``production``; 1-40 of ``[a-z0-9_-]``, not a ``promptrail-`` name: else ValueError), for
    the collector's ``environment=`` views. Calling ``init`` again replaces the previous
    configuration (flushing it first).

    >>> import promptrail
    >>> promptrail.init(api_key="pr-...", base_url="http://127.0.0.1:8000")
    """
    global _pipeline, _atexit_registered
    with _lock:
        if _pipeline is not None:
            _pipeline.shutdown(_SHUTDOWN_TIMEOUT)
        if not enabled:
            _pipeline = Pipeline(trace.NoOpTracer())
            return
        budget = _queue_budget(max_queue_bytes)
        where = environment_setting(environment)
        remember_cache_dir(cache_dir)
        options = PipelineOptions(
            api_key=api_key,
            base_url=base_url,
            sample_rate=sample_rate,
            mask=mask,
            max_bytes=budget,
            max_queue_size=max_queue_size,
            flush_interval=flush_interval,
            export_timeout=export_timeout,
            transport=transport,
            cache_dir=resolve_cache_dir(cache_dir),
            spool_max_bytes=spool_bound(spool_max_bytes),
            spool_max_age=spool_max_age,
            environment=where,
        )
        key = api_key_or_environment(api_key)
        _pipeline = build(options, _stats, _score_stats, tracer_provider, key)
        if not _atexit_registered:
            atexit.register(_at_exit)
            _atexit_registered = True


def _queue_budget(max_queue_bytes: int | None) -> int:
    return byte_setting(
        max_queue_bytes, "PROMPTRAIL_MAX_QUEUE_BYTES", DEFAULT_MAX_PENDING_BYTES, "max_queue_bytes"
    )


def _ensure() -> Pipeline:
    with _lock:
        if _pipeline is None:
            # First capture without init(): configure from the environment.
            init(enabled=current().enabled)
        assert _pipeline is not None
        return _pipeline


def tracer() -> Tracer:
    """Return the tracer capture uses (initialising from the environment if needed)."""
    # Called for every captured span: once initialised, skip the lock.
    pipeline = _pipeline
    return pipeline.tracer if pipeline is not None else _ensure().tracer


def score_shipper() -> Shipper | None:
    """The queue ``promptrail.score()`` appends to (None when capture is disabled)."""
    pipeline = _pipeline
    return (pipeline if pipeline is not None else _ensure()).scores


def score_dropped(reason: str) -> None:
    """Count a score that never reached the queue (``invalid``: a bad call) as dropped."""
    with _score_stats.lock:
        _score_stats.add("captured")
        _score_stats.drop(reason)


def configured_api_key() -> str:
    """The API key capture sends with: ``init(api_key=...)``, else ``PROMPTRAIL_API_KEY``."""
    pipeline = _pipeline
    if pipeline is not None and pipeline.api_key:
        return pipeline.api_key
    return current().api_key.strip()


def flush(timeout: float = 5.0) -> bool:
    """Send every captured record and score now; False if ``timeout`` (seconds) ran out first."""
    pipeline = _pipeline
    if pipeline is None or pipeline.exporter is None:
        return True
    outcome: list[bool] = []

    def run() -> None:
        outcome.append(pipeline.flush(timeout))

    worker = threading.Thread(target=run, name="promptrail-flush", daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(outcome and outcome[0])


def shutdown(timeout: float = _SHUTDOWN_TIMEOUT) -> None:
    """Flush (within ``timeout``) and stop capturing."""
    global _pipeline
    with _lock:
        if _pipeline is not None:
            _pipeline.shutdown(timeout)
            _pipeline = None
        remember_cache_dir(None)  # clients made from now on use the environment's again


def _at_exit() -> None:
    # Bounded: an application must be able to exit even when the collector is down.
    shutdown(_SHUTDOWN_TIMEOUT)


def stats() -> dict[str, Any]:
    """Return capture counters: captured, exported, pending, spooled, dropped (by reason).

    ``captured == exported + pending + spooled + dropped_total`` in every snapshot; ``queued``
    is the part of ``pending`` not yet taken by the shipper. ``spooled``: records written to
    the disk spool for later; ``replayed``: spooled records (this process's or another's)
    this process delivered; ``spool_dropped``: records the spool gave up on, by reason
    (``spool_full``, ``spool_expired``, ``spool_corrupt``); ``spool``: its directory (None:
    memory only).
    """
    pipeline = _pipeline
    with _stats.lock:
        queued = pipeline.queued if pipeline else 0
        waiting = pipeline.exporter.pending if pipeline and pipeline.exporter else 0
        snapshot = {"captured": 0, "exported": 0, "spooled": 0, "replayed": 0, **_stats.snapshot()}
    in_flight = snapshot.pop("in_flight", 0)
    snapshot["pending"] = queued + in_flight + waiting
    snapshot["queued"] = queued
    if pipeline is not None and pipeline.shipper is not None:
        # The shipper counts a span as captured once it leaves its queue.
        snapshot["captured"] = snapshot.get("captured", 0) + queued
    spool = pipeline.exporter.spool if pipeline and pipeline.exporter else None
    snapshot["spool"] = str(spool.directory) if spool is not None else None
    snapshot["scores"] = _score_snapshot(pipeline.scores if pipeline else None)
    return snapshot


def _score_snapshot(scores: Shipper | None) -> dict[str, Any]:
    """The scores' own counters, with the same invariant as the records'."""
    with _score_stats.lock:
        queued = scores.queued if scores else 0
        waiting = scores.exporter.pending if scores else 0
        snapshot = {
            "captured": 0,
            "exported": 0,
            "spooled": 0,
            "replayed": 0,
            **_score_stats.snapshot(),
        }
    snapshot["pending"] = queued + snapshot.pop("in_flight", 0) + waiting
    snapshot["queued"] = queued
    snapshot["captured"] += queued
    return snapshot


def reset_stats() -> None:
    """Zero the counters (tests, benchmarks)."""
    _stats.reset()
    _score_stats.reset()
