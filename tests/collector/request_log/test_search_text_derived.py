"""The text search reads is derived by ClickHouse from the stored JSON for records without input
whose objects are flat and ASCII (migration 54), and written by the collector for every other
record: either way it is the same text, so search finds the same records."""

from __future__ import annotations

import json
import random
from contextlib import closing
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_rows import (
    RequestRow,
    encode_rows,
    search_text,
    stored_search_text,
)
from promptrail.collector.store.requests import RequestStore

# Strings that test the engine's unescaping and lower-casing against Python's: quotes,
# backslashes, control characters, a line separator, and letters whose lower case differs
# between the two (those records are written by the collector).
_PIECES = (
    "Plain ASCII Text",
    'quote " and back\\slash',
    "new\nline\ttab\r",
    "nul\x00 and \x01 control",
    "ÜBER straße",
    "İstanbul",
    "ΣΊΣΥΦΟΣ",
    "line\u2028separator",
    "emoji 😀 OK",
    "",
    "123",
    "{not json}",
)


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if depth < 2 and kind < 0.08:
        return {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    if depth < 2 and kind < 0.14:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind < 0.18:
        return rng.choice([7, -1.5, True, None])
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 3)))


def _flat_ascii(rng: random.Random) -> dict[str, str]:
    ascii_pieces = [p for p in _PIECES if p.isascii()]
    return {f"k{i}": rng.choice(ascii_pieces) for i in range(rng.randint(0, 4))}


def _records(count: int) -> list[RequestRow]:
    rng = random.Random(54)
    rows = []
    for i in range(count):
        flat = i % 2 == 0  # half of them the shape the engine derives the text of
        rows.append(
            RequestRow(
                id=f"req_text-{i:03d}",
                created_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=i),
                prompt_name="p",
                input_variables=_flat_ascii(rng)
                if flat
                else {f"v{j}": _value(rng) for j in range(rng.randint(0, 3))},
                output=_flat_ascii(rng) if flat else {"content": _value(rng)},
                metadata=_flat_ascii(rng)
                if flat
                else {f"m{j}": _value(rng) for j in range(rng.randint(0, 2))},
                input=None
                if flat or rng.random() < 0.5
                else [{"role": "user", "content": _value(rng)}],
            )
        )
    return rows


def test_the_stored_search_text_is_python_s_for_every_shape_of_record(settings: Settings) -> None:
    rows = _records(400)
    values = [asdict(row) for row in rows]
    derived = [v for v in values if stored_search_text(v) is None]
    # The flat ASCII half is left to the engine (and the few others that came out so), and
    # every record with input, a nested value, a number or a letter outside ASCII is not.
    assert {v["id"] for v in derived} >= {v["id"] for v in values[::2]}
    assert len(derived) < 220
    assert all(v["input"] is None for v in derived)
    encoded = encode_rows("default", values)
    written = {row["id"] for row in json.loads(encoded) if "search_text" in row}
    assert written == {v["id"] for v in values} - {v["id"] for v in derived}

    with closing(open_client(settings.store_url)) as client:
        # One insert holding both kinds of row, as the journal's inserts do.
        RequestStore(client, settings.database).insert([encoded])
        stored = dict(
            client.query(f"SELECT id, search_text FROM `{settings.database}`.requests").result_rows
        )
    assert stored == {v["id"]: search_text(v) for v in values}


def _search(api: TestClient, query: str) -> list[str]:
    response = api.get("/v1/requests/search", params={"query": query})
    assert response.status_code == 200, response.text
    return [hit["id"] for hit in response.json()["data"]]


def test_search_finds_flat_ascii_records_in_any_case_and_others_as_before(
    api: TestClient,
) -> None:
    records = [
        {
            "id": "req_flat",
            "prompt_name": "p",
            "input_variables": {"City": "LISBON Harbour"},
            "output": {"content": 'He said "Quayside" twice\nthen left'},
            "metadata": {"user_id": "Sailor-7"},
        },
        {
            "id": "req_unicode",
            "prompt_name": "p",
            "input_variables": {"city": "İstanbul"},
            "output": {"content": "Quayside by the STRASSE and the Straße"},
        },
        {
            "id": "req_nested",
            "prompt_name": "p",
            "input_variables": {"trip": {"harbour": "Quayside North", "days": 3}},
            "output": {"content": "ok"},
        },
    ]
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code == 201, response.text

    assert sorted(_search(api, "quayside")) == ["req_flat", "req_nested", "req_unicode"]
    assert _search(api, "QUAYSIDE NORTH") == ["req_nested"]
    assert _search(api, "lisbon harbour") == ["req_flat"]
    assert _search(api, '"quayside" twice') == ["req_flat"]
    assert _search(api, "sailor-7") == ["req_flat"]
    assert _search(api, "straße") == ["req_unicode"]
    assert _search(api, "i̇stanbul") == ["req_unicode"]  # Python's lower case of İ
    # Keys are not text: only values are searched.
    assert _search(api, "city") == []
