"""The embedded store's registry journal: a write is acknowledged once it is in the file and
reaches chDB right behind; reads of the tables wait for it; a killed process's writes are
applied by the next one, once, and a torn last entry is dropped (store/writes/journal.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import OperationalError

from promptrail.collector.config import Settings
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.runtime_file import read_runtime
from promptrail.collector.services.container import Services
from promptrail.collector.store.connection import close_client, is_store_outage, open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts import journal_path
from promptrail.collector.store.writes.journal import RegistryJournal, encode_entry, read_entries
from tests.collector.processes import collector

PROJECT = "default"


@pytest.fixture
def scratch(settings: Settings) -> Any:
    """A client of the test's database and a table keeping a deduplication window, as the
    registry's tables do."""
    client = open_client(settings.store_url)
    table = f"`{settings.database}`.`journal_{uuid.uuid4().hex[:8]}`"
    client.command(
        f"CREATE TABLE {table} (n UInt32) ENGINE = MergeTree ORDER BY n "
        "SETTINGS non_replicated_deduplication_window = 100"
    )
    yield client, table
    client.command(f"DROP TABLE IF EXISTS {table}")
    close_client(client)


def insert(table: str, n: int, token: str) -> str:
    return f"INSERT INTO {table} SETTINGS insert_deduplication_token = '{token}' VALUES ({n})"


def test_a_killed_process_s_entries_are_applied_once_and_a_torn_tail_is_dropped(
    scratch: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client, table = scratch
    path = tmp_path / "registry.journal"
    whole = encode_entry(insert(table, 1, "a")) + encode_entry(
        f"{insert(table, 2, 'b')}; {insert(table, 3, 'c')}"
    )
    torn = encode_entry(insert(table, 4, "d"))[:-3]  # the process died mid-append
    path.write_bytes(whole + torn)
    caplog.set_level(logging.INFO, logger="promptrail.collector.store.writes.journal")

    RegistryJournal(path, client.command).close()

    assert client.query(f"SELECT n FROM {table} ORDER BY n").result_rows == [(1,), (2,), (3,)]
    assert path.read_bytes() == b""
    dropped = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(dropped) == 1 and f"{len(torn)} bytes" in dropped[0].getMessage()
    # Applied, then the process died before emptying the file: the next open applies the
    # same entries again, and the tokens keep each row once.
    path.write_bytes(whole)
    RegistryJournal(path, client.command).close()
    assert client.query(f"SELECT n FROM {table} ORDER BY n").result_rows == [(1,), (2,), (3,)]


def test_a_corrupt_entry_stops_replay_there_and_keeps_the_ones_before(
    scratch: Any, tmp_path: Path
) -> None:
    client, table = scratch
    path = tmp_path / "registry.journal"
    second = bytearray(encode_entry(insert(table, 2, "b")))
    second[-1] ^= 0x01  # a flipped byte: its checksum no longer matches
    path.write_bytes(encode_entry(insert(table, 1, "a")) + bytes(second))

    RegistryJournal(path, client.command).close()

    assert client.query(f"SELECT n FROM {table}").result_rows == [(1,)]


def test_appends_are_applied_in_order_and_settle_waits_for_them(
    scratch: Any, tmp_path: Path
) -> None:
    client, table = scratch
    release = threading.Event()
    applied: list[str] = []

    def held_back(statements: str) -> None:
        release.wait(10)
        client.command(statements)
        applied.append(statements)

    journal = RegistryJournal(tmp_path / "registry.journal", held_back)
    try:
        for n in range(1, 6):
            journal.append(insert(table, n, f"t{n}"))
        assert client.query(f"SELECT count() FROM {table}").result_rows == [(0,)]
        threading.Timer(0.2, release.set).start()
        journal.settle()
        assert client.query(f"SELECT n FROM {table} ORDER BY n").result_rows == [
            (n,) for n in range(1, 6)
        ]
        # In order, several entries to a call when they wait: never more calls than entries.
        assert 1 <= len(applied) <= 5
        assert "VALUES (1)" in applied[0]
    finally:
        journal.close()
    assert (tmp_path / "registry.journal").read_bytes() == b""


def test_a_refusing_store_keeps_writes_and_a_read_gets_a_store_outage(
    scratch: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While the store refuses, writes stay acknowledged and kept; a read waiting for them
    fails as a store outage (503 at the API), one warning is logged; then they land."""
    client, table = scratch
    away = f"{table[:-1]}_away`"
    client.command(f"RENAME TABLE {table} TO {away}")  # inserts now fail for real
    journal = RegistryJournal(tmp_path / "registry.journal", client.command)
    try:
        journal.append(insert(table, 7, "seven"))
        with pytest.raises(OperationalError) as refused:
            journal.settle(timeout=0.5)
        assert is_store_outage(refused.value)
        assert (
            encode_entry(insert(table, 7, "seven")) in (tmp_path / "registry.journal").read_bytes()
        )
        client.command(f"RENAME TABLE {away} TO {table}")
        journal.settle(timeout=10)
        assert client.query(f"SELECT n FROM {table}").result_rows == [(7,)]
    finally:
        journal.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not applied" in warnings[0].getMessage()


def test_a_registry_read_waits_for_the_writes_acknowledged_before_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    services = Services.build(settings, store)
    try:
        services.prompts.create(PROJECT, PromptCreate(name="p", template="v1", model="m"))
        (applier,) = store.prompts.write_handles()
        release = threading.Event()
        real = applier.command

        def held_back(*args: Any, **kwargs: Any) -> Any:
            release.wait(10)
            return real(*args, **kwargs)

        monkeypatch.setattr(applier, "command", held_back)
        services.prompts.update(PROJECT, "p", PromptUpdate(template="v2"))  # acknowledged
        threading.Timer(0.2, release.set).start()
        # A read of the table itself (not the memory the service answers from).
        row = store.prompts.version_at(PROJECT, services.prompts.get(PROJECT, "p").prompt_id, 2)
        assert row is not None and row.template == "v2"
        assert release.is_set()  # it waited for the apply
    finally:
        services.close()


def test_versions_acknowledged_before_a_sigkill_are_all_there_after_the_restart(
    tmp_path: Path,
) -> None:
    """Eight writers making versions as fast as they go; the collector killed right after the
    last answer; every acknowledged version is then read back, each number once."""
    log: list[str] = []
    acknowledged: dict[str, list[int]] = {}
    with collector(tmp_path, log) as api:
        names = [f"p{n}" for n in range(8)]
        for name in names:
            created = api.post("/v1/prompts", json={"name": name, "template": "v1", "model": "m"})
            assert created.status_code == 201, created.text

        def write(name: str) -> list[int]:
            numbers = []
            for n in range(2, 22):
                answer = api.patch(f"/v1/prompts/{name}", json={"template": f"v{n}"})
                assert answer.status_code == 200, answer.text
                numbers.append(answer.json()["data"]["version"])
            return numbers

        with ThreadPoolExecutor(len(names)) as pool:
            acknowledged = dict(zip(names, pool.map(write, names), strict=True))
        info = read_runtime(tmp_path)
        assert info is not None
        os.kill(info.pid, signal.SIGKILL)  # no shutdown: nothing applied on the way down
    with collector(tmp_path, log) as api:
        for name, numbers in acknowledged.items():
            assert numbers == list(range(2, 22))
            listed = api.get(f"/v1/prompts/{name}/versions", params={"limit": 100})
            assert listed.status_code == 200, listed.text
            versions = sorted(v["version"] for v in listed.json()["data"])
            assert versions == list(range(1, 22)), (name, versions)
            assert api.get(f"/v1/prompts/{name}/template").json()["content"] == "v21"
    # The second collector stopped cleanly: it applied everything and emptied the file.
    journal = journal_path(f"chdb://{(tmp_path / 'clickhouse').resolve()}", "promptrail")
    assert journal.exists() and journal.read_bytes() == b""


def test_an_append_past_the_bound_waits_for_the_applier(scratch: Any, tmp_path: Path) -> None:
    """Writes cannot run ahead of the store without bound: the backlog a read waits for and
    a restart replays stays small (unbounded, a 10,000-prompt load left 12,352 entries)."""
    client, table = scratch
    release = threading.Event()

    def held_back(statements: str) -> None:
        release.wait(10)
        client.command(statements)

    journal = RegistryJournal(tmp_path / "registry.journal", held_back, max_pending=3)
    try:
        for n in range(1, 4):
            journal.append(insert(table, n, f"t{n}"))
        taken = threading.Event()

        def fourth() -> None:
            journal.append(insert(table, 4, "t4"))
            taken.set()

        writer = threading.Thread(target=fourth)
        writer.start()
        assert not taken.wait(0.3)  # waits: three entries are pending
        release.set()
        assert taken.wait(10)
        writer.join()
        journal.settle()
        assert client.query(f"SELECT n FROM {table} ORDER BY n").result_rows == [
            (n,) for n in range(1, 5)
        ]
    finally:
        release.set()
        journal.close()


def test_a_full_backlog_on_a_refusing_store_fails_the_write_as_an_outage(
    scratch: Any, tmp_path: Path
) -> None:
    client, table = scratch
    away = f"{table[:-1]}_away`"
    client.command(f"RENAME TABLE {table} TO {away}")  # inserts now fail for real
    journal = RegistryJournal(
        tmp_path / "registry.journal", client.command, max_pending=2, append_wait=0.3
    )
    try:
        journal.append(insert(table, 1, "one"))
        journal.append(insert(table, 2, "two"))  # acknowledged: kept while the store refuses
        with pytest.raises(OperationalError) as refused:
            journal.append(insert(table, 3, "three"))
        assert is_store_outage(refused.value)
        assert "not taken" in str(refused.value)
        client.command(f"RENAME TABLE {away} TO {table}")
        journal.settle(timeout=10)
        assert client.query(f"SELECT n FROM {table} ORDER BY n").result_rows == [(1,), (2,)]
    finally:
        journal.close()


def test_the_file_drops_applied_entries_while_writes_keep_coming(
    scratch: Any, tmp_path: Path
) -> None:
    """Under a steady stream the backlog is never empty, so the file is never emptied: it is
    rewritten with the pending entries once it holds enough applied ones."""
    client, table = scratch
    path = tmp_path / "registry.journal"
    held: list[int] = []
    journal: RegistryJournal | None = None

    def apply_and_write_more(statements: str) -> None:
        client.command(statements)
        held.append(len(read_entries(path.read_bytes())[0]))
        assert journal is not None
        if len(held) < 12:  # the next write arrives before this apply returns
            journal.append(insert(table, 100 + len(held), f"more{len(held)}"))

    journal = RegistryJournal(path, apply_and_write_more, compact_after=3)
    try:
        journal.append(insert(table, 1, "first"))
        journal.settle(timeout=10)
        while len(held) < 12:
            journal.settle(timeout=10)
        journal.settle(timeout=10)
        assert max(held) <= 3 + 1, held  # never more than the bound plus the one pending
        assert client.query(f"SELECT count() FROM {table}").result_rows == [(12,)]
        # What the file holds is exactly what a restart would apply: nothing lost.
        assert read_entries(path.read_bytes()) == ([], 0)
    finally:
        journal.close()
