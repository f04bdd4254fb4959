"""Correctness without transactions: racing creates and PATCHes (issue: point 3).

Within one collector the races go over real sockets; across collectors, two stores (two
ClickHouse clients, no shared Python state) work on one database, as two collector
processes would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import httpx
import pytest

from promptrail.collector.config import Settings
from promptrail.collector.errors import PromptAlreadyExists
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.store.database import Store
from tests.keys import DEFAULT_AUTH

T = TypeVar("T")
HEADERS = DEFAULT_AUTH
WRITERS = 16


def race(count: int, action: Callable[[int], T]) -> list[T]:
    """Run ``action(i)`` on ``count`` threads released at the same instant."""
    barrier = threading.Barrier(count)

    def run(i: int) -> T:
        barrier.wait()
        return action(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def test_concurrent_creates_of_one_name_give_one_prompt_and_409s(live_url: str) -> None:
    with httpx.Client(base_url=live_url, headers=HEADERS) as client:
        statuses = race(
            WRITERS,
            lambda i: (
                client.post(
                    "/v1/prompts",
                    json={"name": "hot", "template": f"writer {i}", "model": "gpt-4o"},
                ).status_code
            ),
        )
        listed = client.get("/v1/prompts").json()

    assert sorted(statuses) == [201] + [409] * (WRITERS - 1)
    assert listed["pagination"]["total"] == 1
    assert [p["name"] for p in listed["data"]] == ["hot"]


def test_concurrent_patches_take_every_version_number_once(live_url: str) -> None:
    with httpx.Client(base_url=live_url, headers=HEADERS, timeout=60) as client:
        client.post("/v1/prompts", json={"name": "busy", "template": "v1", "model": "gpt-4o"})
        responses = race(
            WRITERS,
            lambda i: client.patch("/v1/prompts/busy", json={"template": f"from writer {i}"}),
        )
        history = client.get("/v1/prompts/busy/versions").json()["data"]

    assert all(r.status_code == 200 for r in responses)
    numbers = sorted(r.json()["data"]["version"] for r in responses)
    assert numbers == list(range(2, WRITERS + 2))
    assert [v["version"] for v in history] == list(range(WRITERS + 1, 0, -1))
    # Every writer's template landed in the version number it was told it got.
    by_number = {v["version"]: v["template"] for v in history}
    assert all(
        by_number[r.json()["data"]["version"]] == r.json()["data"]["template"] for r in responses
    )


@pytest.fixture
def two_collectors(settings: Settings) -> Iterator[tuple[Services, Services]]:
    """Two independent service stacks on one database, as two collector processes."""
    stores = [
        Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
        for _ in range(2)
    ]
    both = Services.build(settings, stores[0]), Services.build(settings, stores[1])
    yield both
    for services in both:
        services.close()


def test_creates_racing_across_collectors_give_one_prompt(
    two_collectors: tuple[Services, Services],
) -> None:
    def create(i: int) -> str:
        services = two_collectors[i % 2]
        try:
            services.prompts.create(
                "default", PromptCreate(name="shared", template=f"w{i}", model="gpt-4o")
            )
        except PromptAlreadyExists:
            return "conflict"
        return "created"

    outcomes = race(WRITERS, create)

    assert sorted(outcomes) == ["conflict"] * (WRITERS - 1) + ["created"]
    for services in two_collectors:
        assert len(services.prompts.versions("default", "shared")) == 1


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


def test_patches_racing_across_collectors_lose_no_version(
    two_collectors: tuple[Services, Services],
) -> None:
    first, _ = two_collectors
    first.prompts.create("default", PromptCreate(name="shared", template="v1", model="gpt-4o"))

    race_patches(two_collectors, "shared", WRITERS)
