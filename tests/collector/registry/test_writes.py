"""Issue 35: registry writes in one store call, reads from memory, and the versions list paged.

The store calls are counted on the real chDB client (every ``query``, ``command`` and
``insert`` it runs), so a write that reads the head first, or reads its insert back in a second
round trip, fails here. The compare-and-set stays: other store clients on the same database
(their own index, nothing shared) still get one 409 and never a version number twice.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.errors import PromptAlreadyExists, PromptNotFound
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.services.prompts.live_ids import _STRIPES
from promptrail.collector.store.prompts import PromptRef
from tests.collector.contract import assert_error

PROJECT = "default"


def services_of(api: TestClient) -> Services:
    services: Services = api.app.state.services  # type: ignore[attr-defined]
    return services


def count_calls(monkeypatch: pytest.MonkeyPatch, services: Services) -> list[str]:
    """Record every call the store's clients make from now on (query, command, insert): the
    collector's client and the one the registry's writes use (the journal's applier)."""
    store = services.store
    store.prompts.settle()  # the writes before counting are applied first, not counted
    handles = store.prompts.write_handles()
    assert handles, "a write ran before counting, so the registry's write client is open"
    seen: list[str] = []
    for client in (store.client, *handles):
        for method in ("query", "command", "insert"):
            real = getattr(client, method)

            def recorded(*args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
                seen.append(f"{_name}: {str(args[0])[:80] if args else ''}")
                return _real(*args, **kwargs)

            monkeypatch.setattr(client, method, recorded)
    return seen


@pytest.mark.cost
def test_a_new_version_is_one_store_call(api: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    api.post("/v1/prompts", json={"name": "p", "template": "v1", "model": "gpt-4o"})
    seen = count_calls(monkeypatch, services_of(api))

    response = api.patch("/v1/prompts/p", json={"template": "v2"})

    assert response.status_code == 200 and response.json()["data"]["version"] == 2
    services_of(api).store.prompts.settle()  # acknowledged once journaled: now applied
    assert len(seen) == 1, seen
    # ...and what it stored is read back from memory, with no call at all.
    seen.clear()
    assert api.get("/v1/prompts/p/template").json()["content"] == "v2"
    assert seen == []


@pytest.mark.cost
def test_a_create_is_one_store_call_once_the_project_is_loaded(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.post("/v1/prompts", json={"name": "first", "template": "v1", "model": "gpt-4o"})
    seen = count_calls(monkeypatch, services_of(api))

    created = api.post("/v1/prompts", json={"name": "second", "template": "v1", "model": "m"})
    taken = api.post("/v1/prompts", json={"name": "second", "template": "v1", "model": "m"})

    assert created.status_code == 201
    assert_error(taken, 409, "PROMPT_ALREADY_EXISTS")
    services_of(api).store.prompts.settle()
    assert len(seen) == 1, seen  # the 409 is decided from memory
    seen.clear()
    assert api.get("/v1/prompts/second").json()["data"]["version"] == 1
    assert seen == []


def test_a_name_deleted_and_created_again_reads_the_new_prompt_from_memory(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.post("/v1/prompts", json={"name": "p", "template": "old", "model": "gpt-4o"})
    api.put("/v1/prompts/p/labels/production", json={"version": 1})
    assert api.delete("/v1/prompts/p").status_code == 200
    api.post("/v1/prompts", json={"name": "p", "template": "new", "model": "gpt-4o"})
    seen = count_calls(monkeypatch, services_of(api))

    assert api.get("/v1/prompts/p/template").json()["content"] == "new"
    assert_error(api.get("/v1/prompts/p/versions/by-label/production/template"), 404)
    assert seen == []


def test_a_create_after_another_client_reused_the_name_claims_the_next_generation(
    two_collectors: tuple[Services, Services],
) -> None:
    mine, theirs = (s.prompts for s in two_collectors)
    assert mine.live_ids.enabled and theirs.live_ids.enabled
    with pytest.raises(PromptNotFound):
        mine.get(PROJECT, "p")  # loads this client's index: no such name
    theirs.create(PROJECT, PromptCreate(name="p", template="theirs", model="gpt-4o"))
    theirs.delete(PROJECT, "p")

    # This index still thinks generation 1 is free: the claim's compare-and-set says no,
    # and the store's state decides (the name is not live, so the create goes on).
    row = mine.create(PROJECT, PromptCreate(name="p", template="mine", model="gpt-4o"))

    store = two_collectors[1].store.prompts
    assert store.live_prompt_id(PROJECT, PromptRef("p", by_id=False)) == row.prompt_id
    assert mine.get(PROJECT, "p").template == "mine"
    # The other client's index missed that create (each embedded collector's index sees its
    # own writes only): its own create of the name still gets the store's 409.
    with pytest.raises(PromptAlreadyExists):
        theirs.create(PROJECT, PromptCreate(name="p", template="again", model="gpt-4o"))


def test_racing_writers_over_two_collectors_with_loaded_indexes_stay_exact(
    two_collectors: tuple[Services, Services],
) -> None:
    first, second = (s.prompts for s in two_collectors)
    first.create(PROJECT, PromptCreate(name="shared", template="v1", model="gpt-4o"))
    for prompts in (first, second):
        assert prompts.get(PROJECT, "shared").version == 1  # both indexes loaded
    writers = 12
    barrier = threading.Barrier(writers)

    def write(i: int) -> int:
        barrier.wait()
        prompts = (first, second)[i % 2]
        return prompts.update(PROJECT, "shared", PromptUpdate(template=f"w{i}")).version

    with ThreadPoolExecutor(writers) as pool:
        numbers = sorted(pool.map(write, range(writers)))

    assert numbers == list(range(2, writers + 2))
    stored = [v.row.version for v in first.versions(PROJECT, "shared")]
    assert stored == list(range(writers + 1, 0, -1))


# -- the versions list, paged ----------------------------------------------------------------


def test_the_versions_list_is_paged_by_cursor(api: TestClient) -> None:
    api.post("/v1/prompts", json={"name": "p", "template": "v1", "model": "gpt-4o"})
    for n in range(2, 8):
        api.patch("/v1/prompts/p", json={"template": f"v{n}"})
    api.put("/v1/prompts/p/labels/production", json={"version": 2})

    seen: list[int] = []
    labels: dict[int, list[str]] = {}
    cursor = None
    pages = 0
    while True:
        query: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        body = api.get("/v1/prompts/p/versions", params=query).json()
        pages += 1
        seen += [v["version"] for v in body["data"]]
        labels.update({v["version"]: v["labels"] for v in body["data"]})
        assert body["pagination"]["has_more"] == ("next_cursor" in body["pagination"])
        cursor = body["pagination"].get("next_cursor")
        if cursor is None:
            break

    assert seen == [7, 6, 5, 4, 3, 2, 1]
    assert pages == 3
    assert labels[2] == ["production"]
    # Without a limit, the first page holds up to 100 versions: all seven here.
    whole = api.get("/v1/prompts/p/versions").json()
    assert [v["version"] for v in whole["data"]] == seen
    assert whole["pagination"] == {"has_more": False}


@pytest.mark.parametrize("cursor", ["nonsense", "x" * 900, "eyJiZWZvcmUiOiAzfQ"])
def test_a_bad_versions_cursor_is_a_validation_error(api: TestClient, cursor: str) -> None:
    api.post("/v1/prompts", json={"name": "p", "template": "v1", "model": "gpt-4o"})

    assert_error(
        api.get("/v1/prompts/p/versions", params={"cursor": cursor}), 400, "VALIDATION_ERROR"
    )


def test_a_cursor_of_the_prompt_list_is_not_a_versions_cursor(api: TestClient) -> None:
    for name in ("a", "b"):
        api.post("/v1/prompts", json={"name": name, "template": "v1", "model": "gpt-4o"})
    list_cursor = api.get("/v1/prompts", params={"limit": 1}).json()["pagination"]["next_cursor"]

    assert_error(api.get("/v1/prompts/a/versions", params={"cursor": list_cursor}), 400)
    assert_error(api.get("/v1/prompts/a/versions", params={"limit": 0}), 400)
    assert_error(api.get("/v1/prompts/a/versions", params={"limit": 101}), 400)


def test_writers_of_other_prompts_are_not_held_by_a_slow_writer(api: TestClient) -> None:
    # A writer of prompt "slow" holds its prompt's lock (as during a stalled store call): a
    # new version of another prompt and a create of another name go through meanwhile, and
    # a second writer of "slow" waits for it.
    prompts = services_of(api).prompts
    prompts.create(PROJECT, PromptCreate(name="slow", template="v1", model="gpt-4o"))
    slow_id = prompts.get(PROJECT, "slow").prompt_id
    stripe = hash((PROJECT, f"prompt/{slow_id}")) % _STRIPES
    # A name and a prompt whose locks are not the held one (locks are striped by hash).
    names = (f"n{i}" for i in range(1000) if hash((PROJECT, f"name/n{i}")) % _STRIPES != stripe)
    new = next(names)
    fast = ""
    for name in names:
        row = prompts.create(PROJECT, PromptCreate(name=name, template="v1", model="gpt-4o"))
        if hash((PROJECT, f"prompt/{row.prompt_id}")) % _STRIPES != stripe:
            fast = name
            break

    with ThreadPoolExecutor(3) as pool, prompts.live_ids.holding(PROJECT, f"prompt/{slow_id}"):
        blocked = pool.submit(prompts.update, PROJECT, "slow", PromptUpdate(template="v2"))
        versioned = pool.submit(prompts.update, PROJECT, fast, PromptUpdate(template="v2"))
        created = pool.submit(
            prompts.create, PROJECT, PromptCreate(name=new, template="v1", model="gpt-4o")
        )
        assert versioned.result(timeout=60).version == 2
        assert created.result(timeout=60).version == 1
        assert not blocked.done()
    assert blocked.result(timeout=60).version == 2
