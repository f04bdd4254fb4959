"""Correctness without transactions: racing creates and PATCHes (issue: point 3).

Within one collector the races go over real sockets; across collectors, two stores (two
ClickHouse clients, no shared Python state) work on one database, as two collector
processes would.
"""

from __future__ import annotations

import httpx

from promptrail.collector.errors import PromptAlreadyExists
from promptrail.collector.models.prompts import PromptCreate
from promptrail.collector.services.container import Services
from tests.collector.registry.steps import race, race_patches
from tests.keys import DEFAULT_AUTH

HEADERS = DEFAULT_AUTH
WRITERS = 16


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


def test_patches_racing_across_collectors_lose_no_version(
    two_collectors: tuple[Services, Services],
) -> None:
    first, _ = two_collectors
    first.prompts.create("default", PromptCreate(name="shared", template="v1", model="gpt-4o"))

    race_patches(two_collectors, "shared", WRITERS)
