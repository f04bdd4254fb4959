"""A large batch from the request-log journal runs the log's views side by side, a small one in
turn (store/writes/log_journal.py, ``_token``); either way every copy and index of the log
gets each record's rows."""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime, timedelta

from promptrail.collector.config import Settings
from promptrail.collector.models.requests import RequestRecordIn
from promptrail.collector.services.ingest import record_values
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.request_rows import encode_rows
from promptrail.collector.store.requests import RequestStore
from promptrail.collector.store.writes.log_journal import SIDE_BY_SIDE_BYTES, _token


def _batch(prefix: str, count: int, text: int) -> bytes:
    at = datetime(2026, 11, 30, tzinfo=UTC)
    records = [
        RequestRecordIn(
            id=f"req_{prefix}{i}",
            created_at=at + timedelta(milliseconds=i),
            prompt_name=f"prompt-{i % 7}",
            model="gpt-4o-mini",
            input_variables={"question": f"question {i}"},
            output={"content": "x" * text},
            metadata={"user_id": f"u{i % 50}", "session_id": f"s{i % 300}", "tier": "pro"},
        )
        for i in range(count)
    ]
    return encode_rows("default", [record_values(r, at) for r in records])


def _copies(client: object, database: str, prefix: str) -> dict[str, int]:
    like = f"req_{prefix}%"
    counts = {}
    for table in ("requests", "request_items", "request_metadata", "thread_items", "request_ids"):
        query = f"SELECT count() FROM `{database}`.`{table}` WHERE id LIKE %(like)s"
        counts[table] = client.query(query, parameters={"like": like}).result_rows[0][0]  # type: ignore[attr-defined]
    return counts


def test_large_batches_run_the_views_side_by_side_and_small_ones_in_turn() -> None:
    large = _token("a", [b"x" * (SIDE_BY_SIDE_BYTES - 10), b"x" * 10])
    small = _token("b", [b"x" * (SIDE_BY_SIDE_BYTES - 11), b"x" * 10])

    assert large["parallel_view_processing"] == 1
    assert "parallel_view_processing" not in small
    # Both keep what every batch's insert carries.
    for settings, batch in ((large, "a"), (small, "b")):
        assert settings["insert_deduplication_token"] == f"log/{batch}"
        assert settings["exclude_materialize_skip_indexes_on_insert"] == "idx_search"


def test_every_copy_of_the_log_gets_its_rows_whichever_way_the_views_ran(
    settings: Settings,
) -> None:
    # 2,000 records of ~8.5 KiB: one batch over the size that runs the views side by side.
    large = _batch("large", 2000, 8500)
    small = _batch("small", 300, 200)
    assert len(large) >= SIDE_BY_SIDE_BYTES > len(small)

    with closing(open_client(settings.store_url)) as client:
        store = RequestStore(client, settings.database)
        store.insert([large], _token("large", [large]))
        store.insert([small], _token("small", [small]))
        for prefix, count in (("large", 2000), ("small", 300)):
            # A record, its list copy, its three metadata pairs, its session's and its
            # user's rows (no trace), where its id sits.
            assert _copies(client, settings.database, prefix) == {
                "requests": count,
                "request_items": count,
                "request_metadata": 3 * count,
                "thread_items": 2 * count,
                "request_ids": count,
            }
