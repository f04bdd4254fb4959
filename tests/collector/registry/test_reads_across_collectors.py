"""Registry reads from memory on a ClickHouse server: the live-id index kept fresh by polling.

Two store clients on one database stand for two collectors: A (wired as on the embedded
store) writes, B is wired as on a server (the store says it is not embedded) with polling on.
A write of A reaches B's reads from memory after B's next poll; between polls B's reads make
no store query; B's own writes are B's at once; what B's index does not know yet is asked of
the store, never answered "not found" from memory.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from promptrail.collector.config import Settings
from promptrail.collector.errors import (
    LabelNotFound,
    PromptAlreadyExists,
    PromptNotFound,
    VersionNotFound,
)
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.services.prompts.live_ids import LiveIdIndex
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import PromptRef, RegistryChanges
from tests.collector.registry.steps import claims_of, record_queries, stored_view

PROJECT = "default"
# Long enough that the poller's thread never runs during a test that polls by hand.
BY_HAND = 3600.0


class _ServerStore(Store):
    """A store client that reports a ClickHouse server: its collector polls the registry."""

    @property
    def is_embedded(self) -> bool:
        return False


def open_collector(
    settings: Settings, *, server: bool, poll_seconds: float, start: bool = False
) -> Services:
    """A collector's services on its own store client; ``start`` starts its background work
    as the app does (the registry's poller among it), else only the poller is started."""
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    if server:
        store.__class__ = _ServerStore
    services = Services.build(
        settings.model_copy(update={"registry_poll_seconds": poll_seconds}), store
    )
    if start:
        services.start()
    elif services.prompts.live_ids.polled:
        services.prompts.start_polling(poll_seconds)
    return services


@pytest.fixture
def collectors(settings: Settings) -> Iterator[tuple[Services, Services]]:
    """A (the writer) and B (server-wired, polled by hand), two store clients on one database."""
    a = open_collector(settings, server=False, poll_seconds=0)
    b = open_collector(settings, server=True, poll_seconds=BY_HAND)
    yield a, b
    for services in (a, b):
        services.close()


def no_queries(monkeypatch: pytest.MonkeyPatch, services: Services) -> list[str]:
    return record_queries(monkeypatch, services)


def test_a_server_collector_polls_by_default_and_zero_turns_it_off(settings: Settings) -> None:
    polled = open_collector(settings, server=True, poll_seconds=Settings().registry_poll_seconds)
    off = open_collector(settings, server=True, poll_seconds=0)
    try:
        assert polled.prompts.live_ids.enabled and polled.prompts.live_ids.polled
        assert not off.prompts.live_ids.enabled
    finally:
        polled.close()
        off.close()


@pytest.mark.cost
def test_writes_of_a_reach_bs_reads_from_memory_after_a_poll(
    collectors: tuple[Services, Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = collectors
    a.prompts.create(PROJECT, PromptCreate(name="p", template="v1", model="m"))
    assert b.prompts.get(PROJECT, "p").template == "v1"  # B loads the project
    assert b.prompts.live_ids.indexed(PROJECT)

    a.prompts.update(PROJECT, "p", PromptUpdate(template="v2"))
    a.prompts.move_label(PROJECT, "p", "prod", 1)
    a.prompts.create(PROJECT, PromptCreate(name="q", template="q1", model="m"))
    assert b.prompts.poll() > 0

    seen = no_queries(monkeypatch, b)
    assert b.prompts.get(PROJECT, "p").template == "v2"
    assert b.prompts.resolve_version(PROJECT, "p", label="prod").template == "v1"
    assert b.prompts.get(PROJECT, "q").template == "q1"
    assert b.prompts.list_page(PROJECT, 10, None).total == 2
    assert seen == [], "B's reads between polls asked the store"
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)

    # A label removed and moved on A; a version by number read after the poll.
    a.prompts.move_label(PROJECT, "p", "prod", 2)
    a.prompts.move_label(PROJECT, "q", "beta", 1)
    a.prompts.remove_label(PROJECT, "q", "beta")
    b.prompts.poll()
    seen.clear()
    assert b.prompts.resolve_version(PROJECT, "p", label="prod").version == 2
    assert seen == []
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)


def test_a_name_deleted_and_created_again_on_a_reads_as_the_new_prompt_on_b(
    collectors: tuple[Services, Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = collectors
    old = a.prompts.create(PROJECT, PromptCreate(name="n", template="old", model="m"))
    a.prompts.create(PROJECT, PromptCreate(name="gone", template="g", model="m"))
    assert b.prompts.get(PROJECT, "n").prompt_id == old.prompt_id

    a.prompts.delete(PROJECT, "n")
    new = a.prompts.create(PROJECT, PromptCreate(name="n", template="new", model="m"))
    a.prompts.delete(PROJECT, "gone")
    b.prompts.poll()

    seen = no_queries(monkeypatch, b)
    got = b.prompts.get(PROJECT, "n")
    assert (got.prompt_id, got.template) == (new.prompt_id, "new")
    assert seen == []
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)
    # What B's index does not hold is asked of the store: still not found.
    with pytest.raises(PromptNotFound):
        b.prompts.get(PROJECT, "gone")
    with pytest.raises(PromptNotFound):
        b.prompts.get(PROJECT, f"prompt_{old.prompt_id}")


def test_bs_own_writes_are_bs_at_once_and_misses_ask_the_store(
    collectors: tuple[Services, Services], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = collectors
    b.prompts.create(PROJECT, PromptCreate(name="mine", template="b1", model="m"))
    assert b.prompts.get(PROJECT, "mine").template == "b1"
    seen = no_queries(monkeypatch, b)
    b.prompts.update(PROJECT, "mine", PromptUpdate(template="b2"))
    b.prompts.move_label(PROJECT, "mine", "prod", 1)
    seen.clear()
    assert b.prompts.get(PROJECT, "mine").template == "b2"
    assert b.prompts.resolve_version(PROJECT, "mine", label="prod").template == "b1"
    assert seen == []

    # Made on A and not polled yet: B asks the store instead of answering 404 from memory.
    a.prompts.create(PROJECT, PromptCreate(name="fresh", template="f1", model="m"))
    assert b.prompts.get(PROJECT, "fresh").template == "f1"
    # B's writes decide against the store, whatever its index says: a version A made is
    # learned from the lost race, a name A deleted is free again.
    a.prompts.update(PROJECT, "mine", PromptUpdate(template="a3"))
    assert b.prompts.update(PROJECT, "mine", PromptUpdate(template="b4")).version == 4
    a.prompts.delete(PROJECT, "mine")
    again = b.prompts.create(PROJECT, PromptCreate(name="mine", template="b-new", model="m"))
    assert b.prompts.get(PROJECT, "mine").prompt_id == again.prompt_id
    b.prompts.poll()
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)


def test_bs_writes_go_to_the_live_prompt_even_before_bs_poll(
    collectors: tuple[Services, Services],
) -> None:
    a, b = collectors
    old = a.prompts.create(PROJECT, PromptCreate(name="n", template="old", model="m"))
    b.prompts.get(PROJECT, "n")  # B's index: n -> the old prompt
    a.prompts.delete(PROJECT, "n")
    new = a.prompts.create(PROJECT, PromptCreate(name="n", template="new", model="m"))

    # Not polled yet: B's index still names the old prompt, but writes ask the store.
    assert b.prompts.update(PROJECT, "n", PromptUpdate(template="b2")).prompt_id == new.prompt_id
    assert b.prompts.rollback(PROJECT, "n", 1, []).template == "new"
    b.prompts.move_label(PROJECT, "n", "prod", 2)
    assert [v.row.prompt_id for v in a.prompts.versions(PROJECT, f"prompt_{new.prompt_id}")] == [
        new.prompt_id
    ] * 3
    assert b.store.prompts.labels(PROJECT, new.prompt_id)[0][:2] == ("prod", 2)
    assert b.store.prompts.versions(PROJECT, old.prompt_id)[0].version == 1
    b.prompts.remove_label(PROJECT, "n", "prod")
    assert b.prompts.delete(PROJECT, "n") == f"prompt_{new.prompt_id}"
    b.prompts.poll()
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)


def test_racing_writes_of_both_collectors_leave_bs_polled_index_equal_to_the_store(
    collectors: tuple[Services, Services],
) -> None:
    names = [f"r{i}" for i in range(4)]
    for name in names:
        collectors[0].prompts.create(PROJECT, PromptCreate(name=name, template="t", model="m"))
    collectors[1].prompts.get(PROJECT, names[0])  # B loads the project

    def work(worker: int) -> None:
        rng = random.Random(worker)
        for step in range(25):
            prompts = collectors[rng.randrange(2)].prompts
            name = rng.choice(names)
            kind = rng.randrange(4)
            try:
                if kind == 0:
                    prompts.update(PROJECT, name, PromptUpdate(template=f"{worker}-{step}"))
                elif kind == 1:
                    prompts.move_label(PROJECT, name, rng.choice(["prod", "beta"]), 1)
                elif kind == 2:
                    prompts.delete(PROJECT, name)
                else:
                    prompts.create(PROJECT, PromptCreate(name=name, template="c", model="m"))
            except (PromptNotFound, PromptAlreadyExists, LabelNotFound, VersionNotFound):
                pass
            if worker == 0 and step % 5 == 0:
                collectors[1].prompts.poll()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    collectors[1].prompts.poll()
    assert collectors[1].prompts.live_ids.describe(PROJECT) == stored_view(
        collectors[1].store.prompts
    )


def until(deadline_seconds: float, check: Callable[[], Any]) -> float:
    """Call ``check`` until it returns true; return the seconds it took (fail at the deadline)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < deadline_seconds, "not visible before the deadline"
        time.sleep(0.01)
    return time.monotonic() - start


def test_the_poller_makes_as_writes_visible_on_b_without_a_read_of_the_store(
    settings: Settings,
) -> None:
    a = open_collector(settings, server=False, poll_seconds=0)
    b = open_collector(settings, server=True, poll_seconds=0.05, start=True)
    try:
        a.prompts.create(PROJECT, PromptCreate(name="live", template="v1", model="m"))
        assert b.prompts.get(PROJECT, "live").template == "v1"

        def held(template: str) -> bool:
            row = b.prompts.cached_version(PROJECT, "live")  # memory only, never the store
            return row is not None and row.template == template

        a.prompts.update(PROJECT, "live", PromptUpdate(template="v2"))
        until(10, lambda: held("v2"))
        a.prompts.delete(PROJECT, "live")
        a.prompts.create(PROJECT, PromptCreate(name="live", template="again", model="m"))
        until(10, lambda: held("again"))
        a.prompts.create(PROJECT, PromptCreate(name="other", template="o1", model="m"))
        until(10, lambda: b.prompts.cached_version(PROJECT, "other") is not None)
        a.prompts.delete(PROJECT, "other")
        until(10, lambda: b.prompts.cached_version(PROJECT, "other") is None)
        a.prompts.move_label(PROJECT, "live", "prod", 1)
        until(
            10,
            lambda: (
                (row := b.prompts.cached_version(PROJECT, "live", label="prod")) is not None
                and row.template == "again"
            ),
        )
    finally:
        a.close()
        b.close()


def test_a_failing_poll_warns_once_per_streak_and_says_when_polls_work_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A store away for a while: one warning with its cause, not one every interval; a line
    when polls work again; and the index catches up."""
    caplog.set_level(logging.INFO, logger="promptrail.collector.services.prompts.service")
    a = open_collector(settings, server=False, poll_seconds=0)
    b = open_collector(settings, server=True, poll_seconds=0.02, start=True)
    claims = f"`{settings.database}`.`prompts`"
    away = f"`{settings.database}`.`prompts_away`"
    try:
        a.prompts.create(PROJECT, PromptCreate(name="live", template="v1", model="m"))
        assert b.prompts.get(PROJECT, "live").template == "v1"  # B's polls read the project
        queries = record_queries(monkeypatch, b)

        def polls() -> int:
            return sum("greatest(created_at, deleted_at)" in sql for sql in queries)

        a.store.client.command(f"RENAME TABLE {claims} TO {away}")
        try:
            start = polls()
            # A query is recorded before it runs: the sixth recorded means five have failed.
            until(10, lambda: polls() - start >= 6)
        finally:
            a.store.client.command(f"RENAME TABLE {away} TO {claims}")
        until(10, lambda: any("succeeded again" in r.getMessage() for r in caplog.records))
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "registry poll failed" in warnings[0].getMessage()
        assert warnings[0].exc_info is not None  # the cause, once
        back = next(r for r in caplog.records if "succeeded again" in r.getMessage())
        failed = int(back.getMessage().split("after ")[1].split()[0])
        assert failed >= 5
        a.prompts.update(PROJECT, "live", PromptUpdate(template="v2"))
        until(
            10,
            lambda: (
                (row := b.prompts.cached_version(PROJECT, "live")) is not None
                and row.template == "v2"
            ),
        )
    finally:
        a.close()
        b.close()


def test_a_poll_applies_each_projects_rows_and_applying_them_again_changes_nothing() -> None:
    index = LiveIdIndex(enabled=True, polled=True)
    for project in ("p1", "p2"):
        index.resolve(project, PromptRef("a", by_id=False), claims_of(("a", f"{project}-a")))
    asked: list[tuple[list[str], datetime]] = []

    def read(projects: list[str], since: datetime) -> RegistryChanges:
        asked.append((projects, since))
        return RegistryChanges(
            claims=[
                ("p1", "a", 1, "p1-a", True),  # deleted, then its name claimed again
                ("p1", "a", 2, "p1-new", False),
                ("p2", "b", 1, "p2-b", False),
            ],
            versions=[],
            labels=[("p2", "p2-b", "prod", 1, datetime.now(UTC))],
        )

    assert index.poll(read, timedelta(seconds=10)) == 4
    first = index.describe("p1"), index.describe("p2")
    assert first[0] == ({"a": "p1-new"}, {"p1-new": (1, {})})
    assert first[1] == (
        {"a": "p2-a", "b": "p2-b"},
        {"p2-a": (1, {}), "p2-b": (1, {"prod": 1})},
    )
    index.poll(read, timedelta(seconds=10))
    assert (index.describe("p1"), index.describe("p2")) == first
    # One read for both projects, from the overlap before their last read.
    assert [projects for projects, _ in asked] == [["p1", "p2"], ["p1", "p2"]]
    assert asked[1][1] > asked[0][1]


def test_a_row_older_than_the_polls_overlap_is_read_by_the_reload(
    collectors: tuple[Services, Services],
) -> None:
    a, b = collectors
    first = a.prompts.create(PROJECT, PromptCreate(name="late", template="v1", model="m"))
    b.prompts.get(PROJECT, "late")
    # A version stamped an hour ago (a writer's clock far behind): no poll reads it.
    late = replace(
        first,
        version=2,
        version_id=str(uuid.uuid4()),
        template="v2",
        created_at=first.created_at - timedelta(hours=1),
    )
    assert a.store.prompts.insert_version(PROJECT, late) == late.version_id
    b.prompts.poll()
    assert b.prompts.get(PROJECT, "late").template == "v1"

    assert b.prompts.reload() == 1
    assert b.prompts.get(PROJECT, "late").template == "v2"
    assert b.prompts.live_ids.describe(PROJECT) == stored_view(b.store.prompts)


def test_a_lagging_replicas_rows_do_not_undo_this_collectors_writes() -> None:
    # A poll answered by a replica that has not got this collector's own delete or label
    # move yet reads the rows from before them: the index keeps its own, newer writes.
    index = LiveIdIndex(enabled=True, polled=True)
    index.resolve("p", PromptRef("a", by_id=False), claims_of(("a", "1"), ("b", "2")))
    with index.writing("p"):
        index.deleted("p", "a", "1")
        moved = index.stamp("p")
        index.labeled("p", "2", "prod", 1, None, moved)
    before = moved - timedelta(seconds=1)

    def lagging(projects: list[str], since: datetime) -> RegistryChanges:
        return RegistryChanges(
            claims=[("p", "a", 1, "1", False)],
            versions=[],
            labels=[("p", "2", "prod", 0, before)],
        )

    index.poll(lagging, timedelta(seconds=10))
    assert index.describe("p") == ({"b": "2"}, {"2": (1, {"prod": 1})})
