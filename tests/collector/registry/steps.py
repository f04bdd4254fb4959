"""Steps for the registry: writers raced, the live-id index compared with the store,
its queries recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from promptrail.collector.models.prompts import PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.store.prompts import LivePrompt, LiveState, PromptStore

T = TypeVar("T")


def race(count: int, action: Callable[[int], T]) -> list[T]:
    """Run ``action(i)`` on ``count`` threads released at the same instant."""
    barrier = threading.Barrier(count)

    def run(i: int) -> T:
        barrier.wait()
        return action(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def race_patches(stacks: tuple[Services, Services], name: str, writers: int) -> None:
    """``writers`` PATCHes of ``name`` at once, split over both stacks: they get versions
    2..writers+1, each once, and both stacks read every version as its writer wrote it."""
    rows = race(
        writers,
        lambda i: stacks[i % 2].prompts.update(
            "default", name, PromptUpdate(template=f"writer {i}")
        ),
    )

    assert sorted(r.version for r in rows) == list(range(2, writers + 2))
    for services in stacks:
        stored = {v.row.version: v.row.template for v in services.prompts.versions("default", name)}
        assert sorted(stored) == list(range(1, writers + 2))
        assert all(stored[r.version] == r.template for r in rows)


PROJECT = "default"


def claims_of(*pairs: tuple[str, str]) -> Any:
    """A loader of live prompts at version 1 without labels: (name, id) claims in order."""

    def load(project: str, limit: int) -> LiveState | None:
        return LiveState([LivePrompt(name, pid, 1, ()) for name, pid in pairs], None)

    return load


def stored_view(
    store: PromptStore, project: str = PROJECT
) -> tuple[dict[str, str], dict[str, tuple[int, dict[str, int]]]]:
    """What a fresh load reads from the store, in the shape of ``LiveIdIndex.describe``."""
    state = store.live_prompts(project, 1_000_000)
    assert state is not None
    by_name = {live.name: live.prompt_id for live in state.prompts}  # the newest claim wins
    return by_name, {live.prompt_id: (live.newest, dict(live.labels)) for live in state.prompts}


def record_queries(monkeypatch: pytest.MonkeyPatch, services: Services) -> list[str]:
    """Collect the SQL of every query the store's client runs from now on."""
    client = services.store.client
    seen: list[str] = []
    real = client.query

    def query(sql: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(sql)
        return real(sql, *args, **kwargs)

    monkeypatch.setattr(client, "query", query)
    return seen
