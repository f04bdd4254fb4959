"""Stores as an earlier release left them, for tests of the migrations that upgrade them."""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import pytest

from promptrail.collector.config import Settings
from promptrail.collector.store import migrations
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.request_rows import RequestRow, encode_rows
from promptrail.collector.store.requests import RequestStore


def store_before(
    settings: Settings,
    version: int,
    rows: Iterable[RequestRow],
    statements: Sequence[str] = (),
) -> None:
    """Make the test database anew, migrated up to (not including) ``version``, then store ``rows``.

    ``statements`` run in between, to put back what that release's schema had and the
    current table definitions no longer say.
    """
    client = open_client(settings.store_url)
    try:
        # The fixture's database arrives migrated to the latest version (see tests/databases.py).
        client.command(f"DROP DATABASE IF EXISTS `{settings.database}` SYNC")
        with pytest.MonkeyPatch.context() as patch:
            before = tuple(m for m in migrations.MIGRATIONS if m.version < version)
            patch.setattr(migrations, "MIGRATIONS", before)
            assert migrations.migrate(client, settings.database) == [m.version for m in before]
        for statement in statements:
            client.command(statement)
    finally:
        client.close()
    insert_rows(settings, rows)


def wide_rows(prefix: str, count: int, chars: int) -> list[RequestRow]:
    """``count`` records a minute apart, each with ``chars`` random letters of output.

    Random letters, so that compression does not make their parts small. An output starts
    with ``<prefix>marker<i>end``, a word search finds in that record alone; ids are
    ``req_<prefix>-<i:04d>`` and the metadata is ``{"batch": prefix}``.
    """
    rng = random.Random(prefix)
    return [
        RequestRow(
            id=f"req_{prefix}-{i:04d}",
            created_at=datetime(2026, 5, 4, tzinfo=UTC) + timedelta(minutes=i),
            prompt_name="support",
            input_variables={"q": f"question {i}"},
            output={
                "content": f"{prefix}marker{i}end "
                + "".join(rng.choices(string.ascii_letters, k=chars))
            },
            metadata={"batch": prefix},
        )
        for i in range(count)
    ]


def assert_stored_whole(store: Store, rows: Sequence[RequestRow]) -> None:
    """The first, a middle and the last of ``rows`` read back with their exact outputs."""
    for row in (rows[0], rows[len(rows) // 2 + 7], rows[-1]):
        stored = store.requests.get("default", row.id)
        assert stored is not None and stored.output == row.output


def encoded(rows: Iterable[RequestRow]) -> bytes:
    """``rows`` of project default, encoded for :meth:`RequestStore.insert`."""
    return encode_rows("default", [asdict(row) for row in rows])


def insert_rows(settings: Settings, rows: Iterable[RequestRow]) -> None:
    """Store ``rows`` for project default straight through the store, in one insert."""
    client = open_client(settings.store_url)
    try:
        RequestStore(client, settings.database).insert([encoded(rows)])
    finally:
        client.close()


def backfill(settings: Settings, name: str) -> str:
    """Return the backfill statement of the migration called ``name``."""
    (migration,) = [m for m in migrations.MIGRATIONS if m.name == name]
    (statement,) = [
        s
        for s in migrations.migration_statements(migration, settings.database, None)
        if s.startswith("INSERT")
    ]
    return statement
