"""The embedded store's in-memory live-id index: exact after every write, unused on a server.

A cold read resolves a path's name (or id) to the live prompt's id from memory instead of a
``prompts FINAL`` lookup. These tests read through the index right after each write that can
change an answer, so a stale index fails them; and they check that a collector on a ClickHouse
server (several collectors, other writers) never consults it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.api.deps import Services
from promptrail.collector.config import Settings
from promptrail.collector.errors import PromptAlreadyExists, PromptNotFound
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.live_ids import LiveIdIndex
from promptrail.collector.services.prompts import PromptService
from promptrail.collector.store.prompts import LivePrompt, LiveState, PromptRef, PromptStore
from promptrail.collector.store.store import Store

PROJECT = "default"


def services_of(api: TestClient) -> Services:
    services: Services = api.app.state.services  # type: ignore[attr-defined]
    return services


def no_name_lookups(monkeypatch: pytest.MonkeyPatch, store: PromptStore) -> None:
    """Make the store's name -> id lookups fail, so only the index can resolve names."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("resolved a name through the store, not the index")

    monkeypatch.setattr(store, "version", refuse)
    monkeypatch.setattr(store, "live_prompt_id", refuse)
    monkeypatch.setattr(store, "live_prompts", refuse)


def status(api: TestClient, path: str) -> tuple[int, Any]:
    response = api.get(path)
    body = response.json()
    if response.status_code == 200:
        return 200, body.get("data", body)
    return response.status_code, body["error"]["code"]


# -- reads through the index after each kind of write -------------------------------------


def test_the_embedded_collector_indexes_a_project_on_its_first_read(api: TestClient) -> None:
    index = services_of(api).prompts.live_ids
    api.post("/v1/prompts", json={"name": "a", "template": "A", "model": "gpt-4o"})

    assert index.enabled
    assert not index.indexed(PROJECT)
    assert api.get("/v1/prompts/a").status_code == 200
    assert index.indexed(PROJECT)


def test_reads_after_every_write_are_exact_without_name_lookups(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = services_of(api).store.prompts
    first = api.post("/v1/prompts", json={"name": "p", "template": "v1", "model": "gpt-4o"})
    first_id = first.json()["data"]["id"]
    assert api.get("/v1/prompts/p").status_code == 200  # loads the index
    no_name_lookups(monkeypatch, store)

    # A new version: latest moves at once, by name and by id.
    api.patch("/v1/prompts/p", json={"template": "v2"})
    assert status(api, "/v1/prompts/p")[1]["version"] == 2
    assert status(api, f"/v1/prompts/{first_id}/template")[1]["content"] == "v2"
    assert status(api, "/v1/prompts/p/versions/1/template")[1]["content"] == "v1"

    # A label and its moves.
    api.put("/v1/prompts/p/labels/production", json={"version": 1})
    label_path = "/v1/prompts/p/versions/by-label/production/template"
    assert status(api, label_path)[1]["content"] == "v1"
    api.put("/v1/prompts/p/labels/production", json={"version": 2})
    assert status(api, label_path)[1]["content"] == "v2"
    api.delete("/v1/prompts/p/labels/production")
    assert status(api, label_path) == (404, "LABEL_NOT_FOUND")

    # A delete: every read 404s at once, by name and by id.
    api.delete("/v1/prompts/p")
    for path in ("/v1/prompts/p", f"/v1/prompts/{first_id}", "/v1/prompts/p/template"):
        assert status(api, path) == (404, "PROMPT_NOT_FOUND"), path
    assert api.patch("/v1/prompts/p", json={"template": "v3"}).status_code == 404

    # The name created again (a new prompt): the name reads the new one, the old id stays gone.
    second = api.post("/v1/prompts", json={"name": "p", "template": "fresh", "model": "gpt-4o"})
    second_id = second.json()["data"]["id"]
    assert status(api, "/v1/prompts/p")[1]["id"] == second_id
    assert status(api, "/v1/prompts/p/template")[1]["content"] == "fresh"
    assert status(api, f"/v1/prompts/{second_id}")[1]["version"] == 1
    assert status(api, f"/v1/prompts/{first_id}") == (404, "PROMPT_NOT_FOUND")

    # A delete by id hides the name too.
    api.delete(f"/v1/prompts/{second_id}")
    assert status(api, "/v1/prompts/p") == (404, "PROMPT_NOT_FOUND")


def test_a_name_asked_for_before_it_exists_is_found_once_created(api: TestClient) -> None:
    assert status(api, "/v1/prompts/later") == (404, "PROMPT_NOT_FOUND")
    assert services_of(api).prompts.live_ids.indexed(PROJECT)

    api.post("/v1/prompts", json={"name": "later", "template": "hi", "model": "gpt-4o"})

    assert status(api, "/v1/prompts/later/template")[1]["content"] == "hi"


def test_projects_are_indexed_apart(api: TestClient) -> None:
    services = services_of(api)
    other = services.keys.create("other")
    api.post("/v1/prompts", json={"name": "same", "template": "mine", "model": "gpt-4o"})
    assert status(api, "/v1/prompts/same/template")[1]["content"] == "mine"

    theirs = {"Authorization": f"Bearer {other}"}
    assert api.get("/v1/prompts/same", headers=theirs).status_code == 404
    api.post(
        "/v1/prompts",
        json={"name": "same", "template": "theirs", "model": "gpt-4o"},
        headers=theirs,
    )
    assert api.get("/v1/prompts/same", headers=theirs).json()["data"]["template"] == "theirs"
    assert status(api, "/v1/prompts/same/template")[1]["content"] == "mine"


def test_racing_creates_and_deletes_leave_the_index_equal_to_the_store(api: TestClient) -> None:
    services = services_of(api)
    prompts, store = services.prompts, services.store.prompts
    names = [f"churn-{i}" for i in range(6)]
    with pytest.raises(PromptNotFound):
        prompts.get(PROJECT, names[0])  # loads the (empty) index before the churn

    def churn(worker: int) -> None:
        for round_ in range(4):
            name = names[(worker + round_) % len(names)]
            with contextlib.suppress(PromptAlreadyExists):
                prompts.create(PROJECT, PromptCreate(name=name, template="t", model="gpt-4o"))
            for ref in (name, names[(worker + 1) % len(names)]):
                with contextlib.suppress(PromptNotFound):
                    prompts.get(PROJECT, ref)
            if (worker + round_) % 2:
                with contextlib.suppress(PromptNotFound):
                    prompts.delete(PROJECT, name)

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(churn, range(6)))

    index = prompts.live_ids
    assert index.indexed(PROJECT)
    for name in names:
        stored = store.live_prompt_id(PROJECT, PromptRef(name, by_id=False))
        assert index.resolve(PROJECT, PromptRef(name, by_id=False), store.live_prompts) == (
            True,
            stored,
        )
        if stored is not None:
            assert index.resolve(PROJECT, PromptRef(stored, by_id=True), store.live_prompts) == (
                True,
                stored,
            )


# -- the server path -----------------------------------------------------------------------


@pytest.fixture
def server_like(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    """Services wired as on a ClickHouse server (the store reports it is not embedded)."""
    monkeypatch.setattr(Store, "is_embedded", property(lambda self: False))
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    services = Services.build(settings, store)
    yield services
    services.close()


def test_a_server_collector_does_not_use_the_index(server_like: Services) -> None:
    prompts = server_like.prompts
    assert not prompts.live_ids.enabled

    prompts.create(PROJECT, PromptCreate(name="s", template="v1", model="gpt-4o"))
    assert prompts.get(PROJECT, "s").version == 1

    assert not prompts.live_ids.indexed(PROJECT)


def test_a_server_collector_sees_other_collectors_writes_at_once(server_like: Services) -> None:
    # Another collector on the same database: its own services, nothing shared in memory.
    other = PromptService(server_like.store.prompts, "other-secret")
    prompts = server_like.prompts
    with pytest.raises(PromptNotFound):
        prompts.get(PROJECT, "elsewhere")

    other.create(PROJECT, PromptCreate(name="elsewhere", template="v1", model="gpt-4o"))
    assert prompts.get(PROJECT, "elsewhere").template == "v1"
    other.update(PROJECT, "elsewhere", PromptUpdate(template="v2"))
    assert prompts.get(PROJECT, "elsewhere").template == "v2"
    other.delete(PROJECT, "elsewhere")
    with pytest.raises(PromptNotFound):
        prompts.get(PROJECT, "elsewhere")


# -- the index alone -----------------------------------------------------------------------


def claims_of(*pairs: tuple[str, str]) -> Any:
    """A loader of live prompts at version 1 without labels: (name, id) claims in order."""

    def load(project: str, limit: int) -> LiveState | None:
        return LiveState([LivePrompt(name, pid, 1, ()) for name, pid in pairs], None)

    return load


def test_a_disabled_index_never_answers() -> None:
    index = LiveIdIndex(enabled=False)

    assert index.resolve("p", PromptRef("a", by_id=False), claims_of(("a", "1"))) == (False, None)
    assert not index.indexed("p")


def test_the_newest_live_claim_of_a_name_wins_and_ids_resolve_to_themselves() -> None:
    index = LiveIdIndex(enabled=True)
    load = claims_of(("a", "old"), ("a", "new"), ("b", "2"))

    assert index.resolve("p", PromptRef("a", by_id=False), load) == (True, "new")
    assert index.resolve("p", PromptRef("old", by_id=True), load) == (True, "old")
    assert index.resolve("p", PromptRef("zzz", by_id=True), load) == (True, None)
    assert index.resolve("p", PromptRef("c", by_id=False), load) == (True, None)


def test_a_load_overtaken_by_a_write_is_not_kept() -> None:
    index = LiveIdIndex(enabled=True)

    def load(project: str, limit: int) -> LiveState:
        # The write lands while the load's query runs: what it read may predate the write.
        index.created(project, "a", "1")
        return LiveState([], None)

    assert index.resolve("p", PromptRef("a", by_id=False), load) == (False, None)
    assert not index.indexed("p")
    assert index.resolve("p", PromptRef("a", by_id=False), claims_of(("a", "1"))) == (True, "1")


def test_writes_after_the_load_are_applied_and_a_stale_delete_keeps_the_new_claim() -> None:
    index = LiveIdIndex(enabled=True)
    index.resolve("p", PromptRef("a", by_id=False), claims_of(("a", "1")))

    index.created("p", "b", "2")
    index.deleted("p", "a", "1")
    index.created("p", "a", "3")
    index.deleted("p", "a", "1")  # applying a write twice changes nothing

    def resolve(value: str, by_id: bool = False) -> tuple[bool, str | None]:
        return index.resolve("p", PromptRef(value, by_id), claims_of())

    assert resolve("a") == (True, "3")
    assert resolve("b") == (True, "2")
    assert resolve("1", by_id=True) == (True, None)
    assert resolve("3", by_id=True) == (True, "3")


def test_a_project_past_the_limit_is_not_indexed() -> None:
    index = LiveIdIndex(enabled=True, max_project_prompts=2)

    def load(project: str, limit: int) -> LiveState | None:
        assert limit == 2
        return None

    assert index.resolve("p", PromptRef("a", by_id=False), load) == (False, None)
    assert not index.indexed("p")


def test_the_least_recently_used_project_goes_past_the_total() -> None:
    index = LiveIdIndex(enabled=True, max_total_prompts=3)
    two = claims_of(("a", "1"), ("b", "2"))
    index.resolve("first", PromptRef("a", by_id=False), two)
    index.resolve("second", PromptRef("a", by_id=False), two)

    assert not index.indexed("first")
    assert index.indexed("second")


def test_a_load_under_way_makes_other_readers_ask_the_store() -> None:
    index = LiveIdIndex(enabled=True)
    started, release = threading.Event(), threading.Event()

    def slow(project: str, limit: int) -> LiveState:
        started.set()
        release.wait(5)
        return claims_of(("a", "1"))(project, limit)  # type: ignore[no-any-return]

    with ThreadPoolExecutor(1) as pool:
        loading = pool.submit(index.resolve, "p", PromptRef("a", by_id=False), slow)
        started.wait(5)
        assert index.resolve("p", PromptRef("a", by_id=False), claims_of()) == (False, None)
        release.set()
        assert loading.result() == (True, "1")
