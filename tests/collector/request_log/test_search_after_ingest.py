"""Search right after an ingest: the request-log journal's inserts leave the log's text index to
the first merge of their parts (request_tables.SEARCH_INDEX), and a search finds exactly the
records it finds once the index is built, in every field kind, beside records stored with the
index (as a store written before this change holds them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import close_client, open_client
from promptrail.collector.store.request_tables import SEARCH_INDEX
from promptrail.collector.store.requests import RequestStore
from tests.collector.upgrades import encoded, wide_rows

# Needles and the records each must find: a word's inside (the index's dictionary scan), upper
# case, a metadata value, a nested input message, a number read as text, two words, a needle
# too short for the index, and one no record holds.
RECORDS: list[dict[str, Any]] = [
    {"id": "req_city", "input_variables": {"city": "Zanzibarine"}, "output": "sunny"},
    {"id": "req_out", "output": {"summary": "Quixotically brief", "n": 2}},
    {"id": "req_meta", "metadata": {"user_id": "u-Marmalade"}, "output": "ok"},
    {
        "id": "req_input",
        "input": [{"role": "user", "content": "Tell me about Kilimanjaro"}],
        "output": "a mountain",
    },
    {"id": "req_number", "input_variables": {"count": 314159}, "output": "pi-ish"},
    *({"id": f"req_fill{i}", "output": f"nothing to see {i}"} for i in range(20)),
]
NEEDLES = {
    "zanzibar": ["req_city"],
    "QUIXOTIC": ["req_out"],
    "marmalade": ["req_meta"],
    "kilimanjaro": ["req_input"],
    "1415": ["req_number"],
    "about kilim": ["req_input"],
    "e 1": sorted(f"req_fill{i}" for i in (1, *range(10, 20))),
    "markerless": [],
    # Stored with the index, before the batch (see the test).
    "oldmarker3end": ["req_old-0003"],
}


@pytest.fixture
def merges_stopped(settings: Settings) -> Iterator[Any]:
    """A client of the test's store with the log's merges stopped, started again after, and
    its parts written in full storage."""
    client = open_client(settings.store_url)
    client.command(f"SYSTEM STOP MERGES `{settings.database}`.requests")
    # Parts with a file per column and index, so that _parts can list a part's index files
    # (a packed part, request_tables.PACKED_PARTS, holds them all in one file).
    client.command(
        f"ALTER TABLE `{settings.database}`.requests RESET SETTING min_bytes_for_full_part_storage"
    )
    try:
        yield client
    finally:
        client.command(f"SYSTEM START MERGES `{settings.database}`.requests")
        close_client(client)


def _found(api: TestClient) -> dict[str, list[str]]:
    found = {}
    for needle in NEEDLES:
        response = api.get("/v1/requests/search", params={"query": needle, "limit": 100})
        assert response.status_code == 200, response.text
        found[needle] = sorted(hit["id"] for hit in response.json()["data"])
    return found


def _parts(client: Any, database: str) -> list[tuple[int, bool]]:
    """The log's active parts: (rows, whether the part holds the text index)."""
    rows = client.query(
        "SELECT rows, path FROM system.parts WHERE database = {d:String} "
        "AND table = 'requests' AND active ORDER BY min_block_number",
        parameters={"d": database},
    ).result_rows
    return [
        (int(count), any(f.startswith(f"skp_idx_{SEARCH_INDEX}.") for f in os.listdir(path)))
        for count, path in rows
    ]


def test_a_search_right_after_an_ingest_finds_what_it_finds_once_the_index_is_built(
    api: TestClient, settings: Settings, merges_stopped: Any
) -> None:
    client = merges_stopped
    # Records stored with the index, as every insert wrote them before the journal's did not.
    RequestStore(client, settings.database).insert([encoded(wide_rows("old", 5, 50))])
    response = api.post("/v1/requests/batch", json={"records": RECORDS})
    assert response.json()["data"] == {"accepted": len(RECORDS), "rejected": []}

    before = _found(api)

    # The journal's part has no index yet: the search read it whole.
    assert _parts(client, settings.database) == [(5, True), (len(RECORDS), False)]
    assert before == NEEDLES

    client.command(f"SYSTEM START MERGES `{settings.database}`.requests")
    client.command(f"OPTIMIZE TABLE `{settings.database}`.requests FINAL")

    # The merge (of each month's parts: the old records are from May) built the index, and
    # the search finds the same records.
    assert _parts(client, settings.database) == [(5, True), (len(RECORDS), True)]
    assert _found(api) == before
