"""The embedded store's in-memory live-id index: exact after every write, unused on a server.

A cold read resolves a path's name (or id) to the live prompt's id from memory instead of a
``prompts FINAL`` lookup. These tests read through the index right after each write that can
change an answer, so a stale index fails them; and they check that a collector on a ClickHouse
server (several collectors, other writers) never consults it.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.errors import (
    LabelNotFound,
    PromptAlreadyExists,
    PromptNotFound,
    VersionNotFound,
)
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.services.prompts import PromptService
from promptrail.collector.services.prompts.live_ids import LiveIdIndex
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import LivePrompt, LiveState, PromptRef, PromptStore
from tests.collector.registry.steps import PROJECT, claims_of, record_queries, stored_view


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


def test_the_embedded_collector_indexes_a_project_on_its_first_use(api: TestClient) -> None:
    # A create decides from the index (issue 35): the first write of a project loads it, as
    # the first read does, and what the write stored is in it at once.
    index = services_of(api).prompts.live_ids
    assert index.enabled
    assert not index.indexed(PROJECT)
    assert api.get("/v1/prompts/a").status_code == 404
    assert index.indexed(PROJECT)
    index.forget(PROJECT)

    api.post("/v1/prompts", json={"name": "a", "template": "A", "model": "gpt-4o"})

    assert index.indexed(PROJECT)
    assert api.get("/v1/prompts/a").status_code == 200


@pytest.mark.cost
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
    """Services wired as on a ClickHouse server (the store reports it is not embedded) with
    the registry's polling off (PROMPTRAIL_REGISTRY_POLL_SECONDS=0; polling on is
    tests/collector/registry/test_reads_across_collectors.py)."""
    monkeypatch.setattr(Store, "is_embedded", property(lambda self: False))
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    services = Services.build(settings.model_copy(update={"registry_poll_seconds": 0}), store)
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


def test_writes_that_land_while_a_load_reads_are_replayed_on_what_it_read() -> None:
    # Under a steady stream of writes some write always lands during a load's read: the load
    # must still be installed (it was dropped, so every write read the store), with the
    # writes its read missed.
    index = LiveIdIndex(enabled=True)

    def load(project: str, limit: int) -> LiveState:
        # What the read saw: "a" at version 1. Then, while its query runs, "b" is created,
        # "a" gets version 3 and a label on 2, and "a" is applied again (its read saw it).
        state = claims_of(("a", "1"))(project, limit)
        index.created(project, "b", "2")
        index.stored_version(project, "1", 3)
        index.labeled(project, "1", "production", 2)
        index.created(project, "a", "1")
        assert state is not None
        return state

    assert index.resolve("p", PromptRef("a", by_id=False), load) == (True, "1")
    assert index.indexed("p")
    assert index.describe("p") == (
        {"a": "1", "b": "2"},
        {"1": (3, {"production": 2}), "2": (1, {})},
    )
    index.created("p", "c", "4")  # after the install: applied to the index as usual
    assert index.resolve("p", PromptRef("c", by_id=False), claims_of()) == (True, "4")


def test_a_load_overtaken_by_a_forget_is_not_kept() -> None:
    # A forget says a write's outcome is unknown: what the load read may lack it.
    index = LiveIdIndex(enabled=True)

    def load(project: str, limit: int) -> LiveState:
        index.forget(project)
        return LiveState([], None)

    assert index.resolve("p", PromptRef("a", by_id=False), load) == (False, None)
    assert not index.indexed("p")
    index.created("p", "b", "2")  # not loading any more: nothing is recorded for a later load
    assert index.resolve("p", PromptRef("a", by_id=False), claims_of(("a", "1"))) == (True, "1")
    assert index.describe("p") == ({"a": "1"}, {"1": (1, {})})


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


# -- newest versions and labels ------------------------------------------------------------


def assert_exact(services: Services, project: str = PROJECT) -> None:
    """The loaded index says exactly what the store says."""
    assert services.prompts.live_ids.describe(project) == stored_view(services.store.prompts)


def test_the_index_agrees_with_the_store_after_every_kind_of_write(api: TestClient) -> None:
    services = services_of(api)
    index = services.prompts.live_ids
    api.post("/v1/prompts", json={"name": "seed", "template": "s", "model": "gpt-4o"})
    assert api.get("/v1/prompts/seed").status_code == 200  # loads the index
    assert index.indexed(PROJECT)

    writes: list[tuple[str, str, dict[str, Any] | None]] = [
        (
            "post",
            "/v1/prompts",
            {"name": "p", "template": "v1", "model": "gpt-4o", "labels": ["production", "canary"]},
        ),
        ("patch", "/v1/prompts/p", {"template": "v2", "labels": ["staging"]}),
        ("patch", "/v1/prompts/p", {"template": "v3"}),
        ("put", "/v1/prompts/p/labels/production", {"version": 3}),
        ("put", "/v1/prompts/p/labels/canary", {"version": 2}),
        ("delete", "/v1/prompts/p/labels/staging", None),
        ("post", "/v1/prompts/p/rollback", {"version": 1, "labels": ["production"]}),
        ("delete", "/v1/prompts/p/labels/canary", None),
        ("post", "/v1/prompts", {"name": "q", "template": "q1", "model": "gpt-4o"}),
        ("delete", "/v1/prompts/p", None),
        (
            "post",
            "/v1/prompts",
            {"name": "p", "template": "again", "model": "gpt-4o", "labels": ["production"]},
        ),
        ("put", "/v1/prompts/q/labels/production", {"version": 1}),
        ("delete", "/v1/prompts/q", None),
    ]
    for method, path, body in writes:
        response = api.request(method.upper(), path, json=body)
        assert response.status_code < 300, (method, path, response.text)
        assert index.indexed(PROJECT), (method, path)
        assert_exact(services)

    by_name, prompts = index.describe(PROJECT) or ({}, {})
    assert prompts[by_name["p"]] == (1, {"production": 1})
    assert "q" not in by_name


@pytest.mark.cost
def test_cold_reads_are_one_point_read_on_the_full_key(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = services_of(api)
    api.post("/v1/prompts", json={"name": "p", "template": "v1", "model": "gpt-4o"})
    for n in range(2, 7):
        api.patch("/v1/prompts/p", json={"template": f"v{n}"})
    api.put("/v1/prompts/p/labels/production", json={"version": 2})
    assert api.get("/v1/prompts/p/versions").status_code == 200
    assert status(api, "/v1/prompts/nothing") == (404, "PROMPT_NOT_FOUND")  # loads the index
    no_name_lookups(monkeypatch, services.store.prompts)

    # The labeled versions and the four newest are held in memory (issue 35): no query at
    # all. Any other version is one point read on the full key.
    reads = {
        "/v1/prompts/p/template": ("v6", 0),
        "/v1/prompts/p/versions/1/template": ("v1", 1),
        "/v1/prompts/p/versions/2/template": ("v2", 0),
        "/v1/prompts/p/versions/3/template": ("v3", 0),
        "/v1/prompts/p/versions/by-label/production/template": ("v2", 0),
        "/v1/prompts/p/versions/by-label/latest/template": ("v6", 0),
    }
    for path, (content, queries) in reads.items():
        services.prompts._cache.invalidate(PROJECT)  # cold: past the version cache
        seen = record_queries(monkeypatch, services)
        assert status(api, path)[1]["content"] == content, path
        assert len(seen) == queries, (path, seen)
        for sql in seen:
            assert "prompt_versions" in sql and "version = {v:UInt32}" in sql, sql
            assert "FINAL" not in sql and "ORDER BY" not in sql and "prompt_labels" not in sql


def test_what_the_index_does_not_hold_gives_the_same_errors_as_the_store(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = services_of(api)
    indexed = services.prompts
    plain = PromptService(services.store.prompts, "plain")  # no index, no cache: the store
    indexed.create(PROJECT, PromptCreate(name="p", template="v1", model="gpt-4o"))
    indexed.update(PROJECT, "p", PromptUpdate(template="v2"))
    indexed.move_label(PROJECT, "p", "production", 1)
    indexed.move_label(PROJECT, "p", "gone", 2)
    indexed.remove_label(PROJECT, "p", "gone")
    pid = indexed.get(PROJECT, "p").prompt_id
    assert indexed.live_ids.indexed(PROJECT)

    def outcome(service: PromptService, ref: str, number: int | None, label: str | None) -> Any:
        try:
            row = service.resolve_version(PROJECT, ref, number=number, label=label)
        except Exception as exc:
            return type(exc).__name__, str(exc)
        return row.version_id

    cases = [
        (ref, number, label)
        for ref in ("p", f"prompt_{pid}", "missing", f"prompt_{'0' * 32}")
        for number, label in (
            (None, None),
            (1, None),
            (2, None),
            (3, None),
            (0, None),
            (None, "production"),
            (None, "gone"),
            (None, "never"),
            (None, "latest"),
        )
    ]
    expected = {case: outcome(plain, *case) for case in cases}
    no_name_lookups(monkeypatch, services.store.prompts)
    for case in cases:
        indexed._cache.invalidate(PROJECT)
        assert outcome(indexed, *case) == expected[case], case
    assert {v[0] for v in expected.values() if isinstance(v, tuple)} == {
        "PromptNotFound",
        "VersionNotFound",
        "LabelNotFound",
    }


def test_racing_patches_and_label_moves_leave_the_index_equal_to_the_store(
    api: TestClient,
) -> None:
    services = services_of(api)
    prompts = services.prompts
    names = ["r0", "r1"]
    for name in names:
        prompts.create(PROJECT, PromptCreate(name=name, template="t1", model="gpt-4o"))
    prompts.get(PROJECT, names[0])  # loads the index before the race
    labels = ["production", "canary", "staging"]

    def race(worker: int) -> None:
        rng = random.Random(worker)
        for _ in range(6):
            name = rng.choice(names)
            action = rng.random()
            if action < 0.4:
                prompts.update(PROJECT, name, PromptUpdate(template=f"w{worker}"))
            elif action < 0.85:
                newest = prompts.get(PROJECT, name).version
                prompts.move_label(PROJECT, name, rng.choice(labels), rng.randint(1, newest))
            else:
                with contextlib.suppress(LabelNotFound):
                    prompts.remove_label(PROJECT, name, rng.choice(labels))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(race, range(6)))

    assert prompts.live_ids.indexed(PROJECT)
    assert_exact(services)
    plain = PromptService(services.store.prompts, "plain")
    for name in names:
        for label in labels:
            try:
                want: Any = plain.resolve_version(PROJECT, name, label=label).version
            except LabelNotFound:
                want = None
            try:
                got: Any = prompts.resolve_version(PROJECT, name, label=label).version
            except LabelNotFound:
                got = None
            assert got == want, (name, label)
        assert prompts.get(PROJECT, name).version == plain.get(PROJECT, name).version


def test_a_load_that_a_write_overtakes_is_installed_with_that_write(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Against the real store: a new version and a label move stored by another thread after
    # the load's read are in the index it installs, which then equals the store.
    services = services_of(api)
    prompts = services.prompts
    prompts.create(PROJECT, PromptCreate(name="x", template="t1", model="gpt-4o"))
    prompts.create(PROJECT, PromptCreate(name="y", template="t1", model="gpt-4o"))
    prompts.live_ids.forget(PROJECT)
    store = services.store.prompts
    real = store.live_prompts

    def write_meanwhile() -> None:
        prompts.update(PROJECT, "x", PromptUpdate(template="t2"))
        prompts.move_label(PROJECT, "x", "production", 2)
        prompts.create(PROJECT, PromptCreate(name="z", template="t1", model="gpt-4o"))

    def overtaken(project: str, limit: int) -> LiveState | None:
        state = real(project, limit)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(write_meanwhile).result()
        monkeypatch.setattr(store, "live_prompts", real)
        return state

    monkeypatch.setattr(store, "live_prompts", overtaken)
    assert prompts.get(PROJECT, "y").version == 1

    assert prompts.live_ids.indexed(PROJECT)
    assert_exact(services)
    no_name_lookups(monkeypatch, store)
    assert prompts.resolve_version(PROJECT, "x", label="production").version == 2
    assert prompts.get(PROJECT, "x").version == 2
    assert prompts.get(PROJECT, "z").version == 1


def test_a_version_another_writer_stored_is_learned_from_the_lost_race(
    api: TestClient,
) -> None:
    services = services_of(api)
    prompts, store = services.prompts, services.store.prompts
    first = prompts.create(PROJECT, PromptCreate(name="p", template="v1", model="gpt-4o"))
    prompts.get(PROJECT, "p")  # loads the index
    # Version 2 lands in the store without reaching the index (a writer whose apply is late).
    other = replace(first, version=2, version_id=str(uuid.uuid4()), template="theirs")
    assert store.try_insert_version(PROJECT, other)
    assert prompts.get(PROJECT, "p").version == 1  # that write has not returned yet

    row = prompts.update(PROJECT, "p", PromptUpdate(template="mine"))

    assert row.version == 3
    assert_exact(services)
    assert prompts.resolve_version(PROJECT, "p", number=2).template == "theirs"


def test_a_write_that_fails_after_storing_drops_the_projects_index(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = services_of(api)
    prompts, store = services.prompts, services.store.prompts
    prompts.create(PROJECT, PromptCreate(name="p", template="v1", model="gpt-4o"))
    prompts.get(PROJECT, "p")
    real = store.set_label

    def stored_then_failed(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        raise ConnectionError("the answer was lost")

    monkeypatch.setattr(store, "set_label", stored_then_failed)
    with pytest.raises(ConnectionError):
        prompts.move_label(PROJECT, "p", "production", 1)
    monkeypatch.undo()

    assert not prompts.live_ids.indexed(PROJECT)
    prompts._cache.invalidate(PROJECT)
    assert prompts.resolve_version(PROJECT, "p", label="production").version == 1
    assert prompts.live_ids.indexed(PROJECT)
    assert_exact(services)


def test_a_project_past_the_limit_reads_versions_and_labels_from_the_store(
    api: TestClient,
) -> None:
    services = services_of(api)
    prompts = PromptService(
        services.store.prompts, "small", live_ids=LiveIdIndex(enabled=True, max_project_prompts=1)
    )
    for name in ("a", "b"):
        prompts.create(PROJECT, PromptCreate(name=name, template="v1", model="gpt-4o"))
    prompts.update(PROJECT, "a", PromptUpdate(template="v2"))
    prompts.move_label(PROJECT, "a", "production", 1)

    assert prompts.get(PROJECT, "a").template == "v2"
    assert prompts.resolve_version(PROJECT, "a", label="production").template == "v1"
    assert prompts.resolve_version(PROJECT, "a", number=1).template == "v1"
    with pytest.raises(LabelNotFound):
        prompts.resolve_version(PROJECT, "a", label="canary")
    with pytest.raises(VersionNotFound):
        prompts.resolve_version(PROJECT, "b", number=2)
    assert not prompts.live_ids.indexed(PROJECT)


# -- versions and labels in the index alone ------------------------------------------------


def labeled_state(*prompts: LivePrompt, stamp: datetime | None = None) -> Any:
    def load(project: str, limit: int) -> LiveState:
        return LiveState(list(prompts), stamp)

    return load


def test_the_index_picks_newest_numbered_and_labeled_versions() -> None:
    index = LiveIdIndex(enabled=True)
    load = labeled_state(LivePrompt("a", "1", 3, (("production", 2),)))
    a = PromptRef("a", by_id=False)

    assert index.locate("p", a, None, None, load) == (True, "1", 3)
    assert index.locate("p", a, 2, None, load) == (True, "1", 2)
    assert index.locate("p", a, 4, None, load) == (True, "1", None)
    assert index.locate("p", a, 0, None, load) == (True, "1", None)
    assert index.locate("p", a, None, "production", load) == (True, "1", 2)
    assert index.locate("p", a, None, "canary", load) == (True, "1", None)
    assert index.locate("p", PromptRef("b", by_id=False), None, None, load) == (True, None, None)


def test_versions_and_labels_applied_twice_or_out_of_order_change_nothing() -> None:
    index = LiveIdIndex(enabled=True)
    a = PromptRef("a", by_id=False)
    index.locate("p", a, None, None, labeled_state(LivePrompt("a", "1", 1, ())))

    index.stored_version("p", "1", 3)
    index.stored_version("p", "1", 2)  # a slower writer of an older number
    index.stored_version("p", "1", 3)
    index.created("p", "a", "1")  # a create's apply repeated after the load saw it
    assert index.locate("p", a, None, None, claims_of()) == (True, "1", 3)

    index.labeled("p", "1", "production", 4)  # a label's version is stored: newest follows
    assert index.locate("p", a, None, None, claims_of()) == (True, "1", 4)
    index.labeled("p", "1", "production", 0)
    index.labeled("p", "1", "production", 0)
    assert index.locate("p", a, None, "production", claims_of()) == (True, "1", None)

    index.deleted("p", "a", "1")
    index.stored_version("p", "1", 5)  # a late version of a deleted prompt is dropped
    index.labeled("p", "1", "production", 5)
    assert index.describe("p") == ({}, {})


def test_label_stamps_only_move_forward() -> None:
    index = LiveIdIndex(enabled=True)
    future = datetime.now(UTC) + timedelta(hours=1)
    index.resolve("p", PromptRef("a", by_id=False), labeled_state(stamp=future))

    stamps = [index.stamp("p") for _ in range(50)]

    assert stamps[0] > future
    assert all(later > earlier for earlier, later in itertools.pairwise(stamps))
