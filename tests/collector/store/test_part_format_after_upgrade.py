"""New parts of the request log are written in the compact format, before and after upgrade."""

from __future__ import annotations

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from tests.collector.upgrades import insert_rows, store_before, wide_rows
from tests.keys import DEFAULT_AUTH

# Records of ~20 KiB: 1,000 make a part of ~20 MiB, over ClickHouse's default wide threshold
# (10 MiB) and under the log's (64 MiB).
RECORDS, CHARS = 1_000, 20_000


def newest_part(settings: Settings) -> tuple[str, int]:
    """The format and rows of the part the latest insert wrote.

    By block number, not by time: the upgrade's ``MATERIALIZE`` mutations rewrite the older
    parts in the background, and a part they rewrite after the insert is newer on the clock.
    """
    client = open_client(settings.store_url)
    try:
        result = client.query(
            "SELECT part_type, rows FROM system.parts WHERE database = {db:String} "
            "AND table = 'requests' AND active ORDER BY max_block_number DESC LIMIT 1",
            parameters={"db": settings.database},
        )
        part_type, count = result.result_rows[0]
        return str(part_type), int(count)
    finally:
        client.close()


def test_an_upgraded_log_writes_new_parts_compact_and_reads_them(settings: Settings) -> None:
    before = wide_rows("before", RECORDS, CHARS)
    # Migration 3 makes the log from today's definition: put back the old releases' setting.
    reset = f"ALTER TABLE `{settings.database}`.requests RESET SETTING min_bytes_for_wide_part"
    store_before(settings, 9, before, statements=[reset])
    # A release before migration 9 wrote a part this size in the wide format.
    assert newest_part(settings) == ("Wide", 1_000)

    app = create_app(settings)  # start-up applies migration 9
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        after = wide_rows("after", RECORDS, CHARS)
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
