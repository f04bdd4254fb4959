"""Issue 52, point 4: registry writes of one project share one store insert per table.

The journal's applier stores every entry waiting when it is free as one ``INSERT .. VALUES``
per table (store/writes/journal.py): a stream of PATCHes and label moves costs a chDB part per
apply, not per write. What must hold besides: an apply retried or replayed after a kill -9
stores each row once (the batch is named in the file before it runs, and retried as it was),
a batch marked applied is not replayed, labels and versions stay consistent, and a read of
the tables sees every write acknowledged before it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from promptrail.collector.config import Settings
from promptrail.collector.models.prompts import PromptCreate, PromptUpdate
from promptrail.collector.services.container import Services
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.prompts.group_commit import _table_rank
from promptrail.collector.store.writes.journal import (
    APPLIED,
    BATCH,
    ROWS,
    RegistryJournal,
    backlog_of,
    encode_entry,
    merged_statements,
    read_entries,
)

PROJECT = "default"


@pytest.fixture
def scratch(settings: Settings) -> Iterator[tuple[Client, str]]:
    """A client of the test's database and a table keeping a deduplication window, as the
    registry's tables do."""
    client = open_client(settings.store_url)
    table = f"`{settings.database}`.`batches_{uuid.uuid4().hex[:8]}`"
    client.command(
        f"CREATE TABLE {table} (n UInt32, tag String) ENGINE = MergeTree ORDER BY n "
        "SETTINGS non_replicated_deduplication_window = 100"
    )
    yield client, table
    client.command(f"DROP TABLE IF EXISTS {table}")
    close_client(client)


def rows_entry(table: str, *numbers: int) -> list[tuple[str, str]]:
    """One write's rows as the registry's store journals them: a head and its values."""
    return [(f"INSERT INTO {table} (n, tag)", ", ".join(f"({n}, 'w')" for n in numbers))]


def stored(client: Client, table: str) -> list[int]:
    return [int(row[0]) for row in client.query(f"SELECT n FROM {table} ORDER BY n").result_rows]


def test_writes_waiting_for_the_applier_are_stored_in_one_insert(
    scratch: tuple[Client, str], tmp_path: Path
) -> None:
    client, table = scratch
    release = threading.Event()
    calls: list[str] = []

    def held_back(statements: str) -> None:
        release.wait(10)
        calls.append(statements)
        client.command(statements)

    journal = RegistryJournal(tmp_path / "registry.journal", held_back)
    try:
        for n in range(1, 41):
            journal.append_rows(rows_entry(table, n))
        assert journal.backlog >= 39  # the first apply holds at most the first entry
        release.set()
        journal.settle(timeout=10)
        assert stored(client, table) == list(range(1, 41))
        # One insert for the first entry the applier took, one for the 39 that waited.
        assert len(calls) <= 2 and sum(c.count("INSERT INTO") for c in calls) <= 2, calls
        assert journal.backlog == 0
    finally:
        release.set()
        journal.close()


def test_a_stream_of_writes_is_gathered_and_a_read_applies_it_at_once(
    scratch: tuple[Client, str], tmp_path: Path
) -> None:
    """Writes arriving one by one wait for the next apply (a part per table, whatever its
    rows) instead of each being an apply of its own; a read of the tables does not wait for
    the gathering: it has the applier apply at once."""
    client, table = scratch
    calls: list[str] = []

    def apply(statements: str) -> None:
        calls.append(statements)
        client.command(statements)

    # A gathering time far past the test's own waits: only the read can end it.
    journal = RegistryJournal(tmp_path / "registry.journal", apply, gather=600)
    try:
        journal.append_rows(rows_entry(table, 1))  # the first apply starts at once
        for n in range(2, 31):
            journal.append_rows(rows_entry(table, n))
        journal.settle(timeout=30)  # raises unless the read made the applier apply
        assert stored(client, table) == list(range(1, 31))
        assert len(calls) <= 2, calls
    finally:
        journal.close()


def test_rows_that_are_no_valid_text_are_refused_before_they_are_acknowledged(
    scratch: tuple[Client, str], tmp_path: Path
) -> None:
    """A write whose rows cannot be kept as UTF-8 fails at its append, as a statement does:
    it never reaches the file, where it would stop the applier for every write behind it."""
    client, table = scratch
    journal = RegistryJournal(tmp_path / "registry.journal", client.command)
    try:
        with pytest.raises(UnicodeEncodeError):
            journal.append_rows([(f"INSERT INTO {table} (n, tag)", "(1, 'a\ud800b')")])
        journal.append_rows(rows_entry(table, 2, 3))
        journal.settle(timeout=10)
        assert stored(client, table) == [2, 3]
    finally:
        journal.close()


def test_merged_inserts_keep_the_order_every_entry_lists_its_tables_in() -> None:
    """A label's row never goes in before the version it points at, nor a name's claim,
    whichever entry first names the labels' table."""
    versions, claims, labels = (
        f"INSERT INTO `db`.`{table}` (x)"
        for table in ("prompt_versions", "prompts", "prompt_labels")
    )
    entries = [
        [(labels, "(1)")],
        [(versions, "(2)"), (labels, "(3)")],
        [(versions, "(4)"), (claims, "(5)")],
    ]
    sql = merged_statements("b1", entries, _table_rank)
    heads = [part.split(" SETTINGS")[0].strip() for part in sql.split(";")]
    assert heads == [versions, claims, labels]
    assert "VALUES (1), (3)" in sql and "VALUES (2), (4)" in sql
    # The same batch always gives the same statements, tokens included.
    assert sql == merged_statements("b1", entries, _table_rank)


def test_a_failed_apply_is_retried_as_the_same_batch(
    scratch: tuple[Client, str], tmp_path: Path
) -> None:
    """The store took the batch's rows but the call failed (its answer lost): the retry is
    the same statements, so the rows are stored once, even with more writes waiting."""
    client, table = scratch
    journal: RegistryJournal | None = None
    attempts: list[str] = []

    def flaky(statements: str) -> None:
        client.command(statements)
        attempts.append(statements)
        if len(attempts) == 1:
            assert journal is not None
            journal.append_rows(rows_entry(table, 9))  # arrives while the apply fails
            raise ConnectionError("the store's answer was lost")

    journal = RegistryJournal(tmp_path / "registry.journal", flaky)
    try:
        journal.append_rows(rows_entry(table, 1, 2))
        journal.settle(timeout=10)
        assert attempts[1] == attempts[0]
        assert stored(client, table) == [1, 2, 9]
    finally:
        journal.close()


def frames(path: Path) -> list[str]:
    found, torn = read_entries(path.read_bytes())
    assert torn == 0
    return found


def test_a_batch_named_before_a_kill_is_replayed_under_its_own_tokens(
    scratch: tuple[Client, str], tmp_path: Path
) -> None:
    """Killed after the batch reached the store and before it was marked applied: the next
    open applies the same batch again, which stores nothing twice; entries no batch named
    are applied too, and a torn last frame is dropped."""
    client, table = scratch
    path = tmp_path / "registry.journal"
    first, second, later = rows_entry(table, 1), rows_entry(table, 2, 3), rows_entry(table, 4)
    client.command(merged_statements("b1", [first, second]))  # what the killed applier did
    path.write_bytes(
        encode_entry(ROWS + json.dumps(first))
        + encode_entry(ROWS + json.dumps(second))
        + encode_entry(BATCH + json.dumps(["b1", 2]))
        + encode_entry(ROWS + json.dumps(later))
        + encode_entry(ROWS + json.dumps(rows_entry(table, 5)))[:-2]  # died mid-append
    )
    assert backlog_of(path.read_bytes()) == 3

    RegistryJournal(path, client.command).close()

    assert stored(client, table) == [1, 2, 3, 4]
    assert path.read_bytes() == b""


def test_a_batch_marked_applied_is_not_replayed(tmp_path: Path, settings: Settings) -> None:
    client = open_client(settings.store_url)
    # No deduplication window: a replayed batch would show as a second row.
    table = f"`{settings.database}`.`applied_{uuid.uuid4().hex[:8]}`"
    client.command(f"CREATE TABLE {table} (n UInt32, tag String) ENGINE = MergeTree ORDER BY n")
    try:
        path = tmp_path / "registry.journal"
        done, pending = rows_entry(table, 1), rows_entry(table, 2)
        client.command(merged_statements("b1", [done]))
        path.write_bytes(
            encode_entry(ROWS + json.dumps(done))
            + encode_entry(BATCH + json.dumps(["b1", 1]))
            + encode_entry(ROWS + json.dumps(pending))
            + encode_entry(APPLIED + "b1")
        )
        assert backlog_of(path.read_bytes()) == 1

        RegistryJournal(path, client.command).close()

        assert stored(client, table) == [1, 2]
    finally:
        client.command(f"DROP TABLE IF EXISTS {table}")
        close_client(client)


def test_a_replay_cut_short_is_replayed_alike(scratch: tuple[Client, str], tmp_path: Path) -> None:
    """The process dies again while it applies what the first one left: the batch it made
    of the unnamed entries was named in the file first, so the third open repeats it
    exactly and every row is stored once."""
    client, table = scratch
    path = tmp_path / "registry.journal"
    path.write_bytes(
        b"".join(encode_entry(ROWS + json.dumps(rows_entry(table, n))) for n in (1, 2, 3))
    )

    def dies_after_storing(statements: str) -> None:
        client.command(statements)
        raise KeyboardInterrupt  # the process's end, right after the store took the rows

    with pytest.raises(KeyboardInterrupt):
        RegistryJournal(path, dies_after_storing)
    assert any(frame.startswith(BATCH) for frame in frames(path))

    RegistryJournal(path, client.command).close()

    assert stored(client, table) == [1, 2, 3]


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    store = Store.open(settings.store_url, settings.database, settings.clickhouse_cluster)
    built = Services.build(settings, store)
    yield built
    built.close()


def test_patches_and_label_moves_of_one_project_share_inserts_and_stay_consistent(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight writers PATCH and move labels in one project while the applier is held back:
    the whole backlog is stored by one insert per table, and the tables then hold every
    version once and each label where the last move put it."""
    prompts = services.prompts
    names = [f"p{n}" for n in range(8)]
    for name in names:
        prompts.create(PROJECT, PromptCreate(name=name, template="v1", model="m"))
    store = services.store.prompts
    store.settle()
    (applier, *_) = store.write_handles()
    release = threading.Event()
    inserts: list[int] = []
    real = applier.command

    def held_back(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        inserts.append(str(args[0]).count("INSERT INTO"))
        return real(*args, **kwargs)

    monkeypatch.setattr(applier, "command", held_back)

    def write(name: str) -> int:
        for n in range(2, 7):
            prompts.update(PROJECT, name, PromptUpdate(template=f"{name} v{n}"))
            prompts.move_label(PROJECT, name, "production", n - 1)
            prompts.move_label(PROJECT, name, "staging", n)
        return n

    with ThreadPoolExecutor(len(names)) as pool:
        futures = [pool.submit(write, name) for name in names]
        release.set()
        assert [future.result() for future in futures] == [6] * len(names)
    store.settle()

    # 8 x 15 writes, and far fewer inserts: each apply is at most one per table.
    assert all(count <= 2 for count in inserts), inserts  # versions and labels
    assert sum(inserts) < 8 * 15 / 2, inserts
    for name in names:
        prompt_id = prompts.get(PROJECT, name).prompt_id
        versions = store.versions(PROJECT, prompt_id, limit=100)
        assert sorted(v.version for v in versions) == [1, 2, 3, 4, 5, 6]
        assert {label: version for label, version, _ in store.labels(PROJECT, prompt_id)} == {
            "production": 5,
            "staging": 6,
        }
