"""Registry writes on the embedded store (issue 35.1): slots decided in memory, one group commit.

The embedded store decides version numbers and name claims from a slot table every store
client of the database in the process shares, and stores the rows of every writer waiting in
one insert per table. These tests hold it to the guarantees of the compare-and-set it replaces
there, and check that a store from before migration 24 (which dropped the heads view on the
embedded store) upgrades and lists its prompts.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import ListFilter
from tests.collector.registry.steps import race, race_patches
from tests.collector.upgrades import store_before
from tests.keys import DEFAULT_AUTH

WRITERS = 8
EVERYTHING = ListFilter(tags=[], folder=None, search=None)


@pytest.fixture
def stacks(two_collectors: tuple[Services, Services]) -> tuple[Services, Services]:
    """Two independent service stacks (two store clients) on one embedded database."""
    return two_collectors


def test_eight_writers_of_one_prompt_get_eight_consecutive_versions_in_group_commits(
    stacks: tuple[Services, Services],
) -> None:
    first, second = stacks
    first.prompts.create("default", PromptCreate(name="hot", template="v1", model="gpt-4o"))
    before = first.store.prompts.group_commits()

    race_patches(stacks, "hot", WRITERS)

    # Both clients' writes went through the one group commit of the database.
    commits, writes = first.store.prompts.group_commits()
    assert second.store.prompts.group_commits() == (commits, writes)
    assert writes - before[1] == WRITERS


def test_writers_waiting_at_once_are_stored_together(
    stacks: tuple[Services, Services],
) -> None:
    first, _ = stacks
    commits, writes = first.store.prompts.group_commits()

    race(
        16,
        lambda i: stacks[i % 2].prompts.create(
            "default", PromptCreate(name=f"p{i}", template=f"t{i}", model="m")
        ),
    )

    after = first.store.prompts.group_commits()
    assert after[1] - writes == 16
    assert after[0] - commits < 16  # some commits stored several writers' rows
    # Every write is stored (each client's index holds its own writes only: the store's list).
    heads, total = first.store.prompts.list_heads("default", EVERYTHING, None, 100)
    assert total == 16
    assert {h.name for h in heads} == {f"p{i}" for i in range(16)}


def test_a_name_created_by_one_client_is_a_409_for_the_other(
    stacks: tuple[Services, Services],
) -> None:
    first, second = stacks
    # The second client's index is loaded before the first creates: it holds the name as free.
    assert second.prompts.list_page("default", 10, None).items == []
    first.prompts.create("default", PromptCreate(name="once", template="a", model="m"))

    with pytest.raises(Exception) as taken:
        second.prompts.create("default", PromptCreate(name="once", template="b", model="m"))

    assert type(taken.value).__name__ == "PromptAlreadyExists"


def test_text_with_quotes_backslashes_and_placeholders_is_stored_as_written(
    api: TestClient,
) -> None:
    template = (
        "It's {{name}} \\n \\' {{x:String}} {name} %s\ttab\nline \x00 \u00e9\u4e2d\U0001f600 `q`"
    )
    created = api.post(
        "/v1/prompts",
        json={
            "name": "q.uote-d_1",
            "template": template,
            "model": "m'1",
            "description": "d'\\",
            "tags": ["a'b", "c\\d"],
            "parameters": {"k": "v'\\"},
        },
    )
    assert created.status_code == 201, created.text
    patched = api.patch("/v1/prompts/q.uote-d_1", json={"template": template + "!"})
    assert patched.status_code == 200, patched.text

    got = api.get("/v1/prompts/q.uote-d_1/versions/1").json()["data"]
    assert got["template"] == template
    assert (got["model"], got["parameters"]) == ("m'1", {"k": "v'\\"})
    newest = api.get("/v1/prompts/q.uote-d_1").json()["data"]
    assert newest["template"] == template + "!"
    assert (newest["description"], newest["tags"]) == ("d'\\", ["a'b", "c\\d"])


def test_a_store_from_before_migration_24_upgrades_and_lists_its_prompts(
    settings: Settings,
) -> None:
    store_before(settings, 24, [])
    old = Store.open(settings.store_url, settings.database)
    try:
        services = Services.build(settings, old)
        try:
            for i in range(3):
                services.prompts.create(
                    "default", PromptCreate(name=f"old{i}", template=f"t{i}", model="m")
                )
            services.prompts.update("default", "old1", PromptUpdate(template="t1 v2"))
        finally:
            services.close()
    finally:
        old.close()

    app = create_app(settings)  # start-up applies migration 24
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        listed = api.get("/v1/prompts").json()
        assert listed["pagination"]["total"] == 3
        assert {p["name"]: p["version"] for p in listed["data"]} == {
            "old0": 1,
            "old1": 2,
            "old2": 1,
        }
        assert api.patch("/v1/prompts/old2", json={"template": "t2 v2"}).status_code == 200
        listed = api.get("/v1/prompts").json()["data"]
        assert {p["name"]: p["version"] for p in listed}["old2"] == 2

    client = open_client(settings.store_url)
    try:
        views = client.query(
            "SELECT name FROM system.tables WHERE database = {db:String} AND name LIKE 'prompt%'",
            parameters={"db": settings.database},
        ).result_rows
    finally:
        client.close()
    names = {str(r[0]) for r in views}
    # The embedded store keeps the heads table but no longer feeds it on every write.
    assert "prompt_heads" in names and "prompt_heads_mv" not in names
    # The store's own list (used past the index's limit) reads the heads from the versions.
    store = Store.open(settings.store_url, settings.database)
    try:
        heads, total = store.prompts.list_heads("default", EVERYTHING, None, 10)
    finally:
        store.close()
    assert total == 3
    assert {h.name: h.version for h in heads} == {"old0": 1, "old1": 2, "old2": 2}


@pytest.mark.cost
def test_the_list_is_answered_from_memory_as_the_store_answers_it(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(7):
        body = {
            "name": f"item{i}",
            "template": f"t{i}",
            "model": "m",
            "description": "Alpha" if i % 2 else "beta",
            "tags": ["even"] if i % 2 == 0 else ["odd", "x"],
            "folder": "/team/a" if i < 3 else "/team/ab",
        }
        assert api.post("/v1/prompts", json=body).status_code == 201
    assert api.patch("/v1/prompts/item2", json={"template": "t2 v2"}).status_code == 200
    assert api.delete("/v1/prompts/item5").status_code in (200, 204)
    services: Services = api.app.state.services  # type: ignore[attr-defined]
    store = services.store
    queries: list[str] = []
    real = store.client.query

    def recorded(*args: object, **kwargs: object) -> object:
        queries.append(str(args[0])[:60])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    cases: list[dict[str, str | int]] = [
        {"limit": 3},
        {"tags": "odd"},
        {"tags": "odd,x"},
        {"folder": "team/a"},
        {"folder": "/team/"},
        {"search": "ALPHA"},
        {"search": "item1"},
    ]
    monkeypatch.setattr(store.client, "query", recorded)
    from_memory = [every_page(api, params) for params in cases]
    assert queries == []  # no store query for any page of any filter
    monkeypatch.setattr(store.client, "query", real)

    # The same pages from the store's own list (the index dropped, so the store answers).
    services.prompts.live_ids.enabled = False
    from_store = [every_page(api, params) for params in cases]
    assert from_memory == from_store
    assert [n for n, _ in from_memory[0][0][0]] == ["item6", "item4", "item3"]
    assert ("item2", 2) in [item for page, _ in from_memory[0] for item in page]
    assert "item5" not in [name for page, _ in from_memory[0] for name, _ in page]


def every_page(api: TestClient, params: dict[str, str | int]) -> list[tuple[list[Any], Any]]:
    """Every page of the prompt list for ``params``: (name, version) items and pagination."""
    pages: list[tuple[list[Any], Any]] = []
    cursor = None
    while True:
        body = api.get("/v1/prompts", params={**params, **({"cursor": cursor} if cursor else {})})
        data = body.json()
        pages.append(([(p["name"], p["version"]) for p in data["data"]], data["pagination"]))
        cursor = data["pagination"].get("next_cursor")
        if not cursor:
            return pages
