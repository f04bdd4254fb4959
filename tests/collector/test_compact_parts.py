"""New parts of the request log are written in the compact format, before and after upgrade."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.requests import RequestRow
from tests.collector.upgrades import insert_rows, store_before

START = datetime(2026, 5, 4, tzinfo=UTC)


def rows(prefix: str, count: int) -> list[RequestRow]:
    """``count`` records of ~20 KiB each: a part of ~20 MiB, over ClickHouse's default wide
    threshold (10 MiB) and under the log's (64 MiB)."""
    rng = random.Random(prefix)
    return [
        RequestRow(
            id=f"req_{prefix}-{i:04d}",
            created_at=START + timedelta(minutes=i),
            prompt_name="support",
            input_variables={"q": f"question {i}"},
            # Random letters: compression must not make the part small.
            output={
                "content": f"{prefix}marker{i}end "
                + "".join(rng.choices(string.ascii_letters, k=20_000))
            },
            metadata={"batch": prefix},
        )
        for i in range(count)
    ]


def newest_part(settings: Settings) -> tuple[str, int]:
    client = open_client(settings.store_url)
    try:
        result = client.query(
            "SELECT part_type, rows FROM system.parts WHERE database = {db:String} "
            "AND table = 'requests' AND active ORDER BY modification_time DESC, name DESC LIMIT 1",
            parameters={"db": settings.database},
        )
        part_type, count = result.result_rows[0]
        return str(part_type), int(count)
    finally:
        client.close()


def test_an_upgraded_log_writes_new_parts_compact_and_reads_them(settings: Settings) -> None:
    before = rows("before", 1_000)
    # Migration 3 makes the log from today's definition: put back the old releases' setting.
    reset = f"ALTER TABLE `{settings.database}`.requests RESET SETTING min_bytes_for_wide_part"
    store_before(settings, 9, before, statements=[reset])
    # A release before migration 9 wrote a part this size in the wide format.
    assert newest_part(settings) == ("Wide", 1_000)

    app = create_app(settings)  # start-up applies migration 9
    with TestClient(app, headers={"Authorization": "Bearer pr-test-default-key"}) as api:
        after = rows("after", 1_000)
        insert_rows(settings, after)
        # One file for all columns: the insert holds a third of the memory (see REQUESTS).
        assert newest_part(settings) == ("Compact", 1_000)

        # Both formats answer every read alike.
        for batch, record in (("before", before[7]), ("after", after[7])):
            detail = api.get(f"/v1/requests/{record.id}").json()["data"]
            assert detail["output"] == record.output
            page = api.get("/v1/requests", params={"metadata.batch": batch, "limit": "100"}).json()
            assert len(page["data"]) == 100
            assert page["data"][0]["id"] == f"req_{batch}-0999"
            found = api.get("/v1/requests/search", params={"query": f"{batch}marker7end"}).json()
            assert [r["id"] for r in found["data"]] == [record.id]
