"""Detail by any id through the id index (request_ids), and list items read narrowly."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from promptrail.collector.app import create_app
from promptrail.collector.config import Settings
from promptrail.collector.store.connection import open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.request_rows import RequestRow
from tests.collector.pages import walk
from tests.collector.upgrades import backfill, store_before
from tests.keys import DEFAULT_AUTH

START = datetime(2026, 4, 28, tzinfo=UTC)

# Ids as clients choose them: the SDK's (trace and span ids), free-form ones, and one shaped
# like a service-made id whose encoded time is not its created_at.
CLIENT_IDS = [
    "req_4bf92f3577b34da6a3ce929d0e0e4736" + "00f067aa0ba902b7",
    "req_bench_000000012",
    "req_order-7781-retry",
    "req_0190aaaaaaaa0000000000000000000f",
]


def full_record(request_id: str, i: int) -> dict[str, Any]:
    return {
        "id": request_id,
        # Three days apart: the records span two monthly partitions.
        "created_at": (START + timedelta(days=3 * i)).isoformat(),
        "prompt_name": "support",
        "version": 3,
        "model": "gpt-4o-mini",
        "provider": "openai",
        "input": [{"role": "user", "content": f"question {i} " + "x" * 2_000}],
        "input_variables": {"question": f"question {i}"},
        "output": {"content": f"answer {i}"},
        "metadata": {"user_id": f"u{i}", "tier": "gold"},
        "usage": {"prompt_tokens": 11, "completion_tokens": 5, "estimated_cost_usd": 0.002},
        "latency_ms": 300 + i,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": f"00f067aa0ba902b{i}",
    }


def post_batch(api: TestClient, records: list[dict[str, Any]]) -> None:
    response = api.post("/v1/requests/batch", json={"records": records})
    assert response.status_code in (200, 201), response.text
    assert response.json()["data"] == {"accepted": len(records), "rejected": []}


def test_detail_finds_every_kind_of_client_id(api: TestClient) -> None:
    records = [full_record(request_id, i) for i, request_id in enumerate(CLIENT_IDS)]
    # Other records around them, so that a lookup has more than its own to skip.
    filler = [full_record(f"req_fill_{i:03d}", i % 7) for i in range(60)]
    post_batch(api, records + filler)

    for i, request_id in enumerate(CLIENT_IDS):
        response = api.get(f"/v1/requests/{request_id}")
        assert response.status_code == 200, (request_id, response.text)
        detail = response.json()["data"]
        assert detail["id"] == request_id
        assert datetime.fromisoformat(detail["created_at"]) == START + timedelta(days=3 * i)
        assert detail["input"] == records[i]["input"]
        assert detail["metadata"] == {"user_id": f"u{i}", "tier": "gold"}
        assert (detail["model"], detail["provider"], detail["span_id"]) == (
            "gpt-4o-mini",
            "openai",
            f"00f067aa0ba902b{i}",
        )
        assert detail["usage"]["prompt_tokens"] == 11


def test_one_id_logged_at_two_times_shows_the_newest_live_one(api: TestClient) -> None:
    # A client that reuses an id with another created_at makes two records; the detail
    # shows the newer, and once that one is deleted, the older.
    older, newer = (
        full_record("req_dup-id", 0),
        {**full_record("req_dup-id", 1), "metadata": {"n": "2"}},
    )
    post_batch(api, [older, newer])

    assert api.get("/v1/requests/req_dup-id").json()["data"]["metadata"] == {"n": "2"}
    api.request("DELETE", "/v1/requests", json={"metadata": {"n": "2"}})
    detail = api.get("/v1/requests/req_dup-id").json()["data"]
    assert detail["metadata"] == {"user_id": "u0", "tier": "gold"}


def test_retried_and_deleted_client_ids(api: TestClient) -> None:
    services = api.app.state.services  # type: ignore[attr-defined]
    # Copies of one record stay separate rows in every table, as before a merge.
    requests = services.store.requests
    for table in (requests.table, requests.items_table, requests.ids_table):
        services.store.client.command(f"SYSTEM STOP MERGES {table}")
    records = [full_record(f"req_client-{i}", i) for i in range(4)]
    for _ in range(3):
        post_batch(api, records)
        services.records.settle()  # each copy stored by an insert of its own
    api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u2"}})

    assert api.get("/v1/requests/req_client-1").json()["data"]["output"] == {"content": "answer 1"}
    gone = api.get("/v1/requests/req_client-2")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "REQUEST_NOT_FOUND"
    # Deleting does not drop the id entry (requests has the last word), nor add one.
    entries = services.store.client.query(
        f"SELECT count() FROM {services.store.requests.ids_table} WHERE id = 'req_client-2'"
    ).result_rows
    assert entries == [(3,)]


def test_a_retry_without_created_at_keeps_the_first_time(api: TestClient) -> None:
    first = api.post(
        "/v1/requests", json={"id": "req_no-time-1", "prompt_name": "p", "output": "a"}
    )
    again = api.post(
        "/v1/requests", json={"id": "req_no-time-1", "prompt_name": "p", "output": "a"}
    )

    assert first.json()["data"]["created_at"] == again.json()["data"]["created_at"]
    assert [r["id"] for r in api.get("/v1/requests").json()["data"]] == ["req_no-time-1"]


def test_list_items_match_the_detail_of_each_record(api: TestClient) -> None:
    records = [full_record(f"req_list-{i}", i) for i in range(5)]
    post_batch(api, records)

    for params in ({}, {"metadata.tier": "gold"}, {"prompt_name": "support"}):
        items = api.get("/v1/requests", params=params).json()["data"]
        assert [item["id"] for item in items] == [f"req_list-{i}" for i in reversed(range(5))]
        for item in items:
            detail = api.get(f"/v1/requests/{item['id']}").json()["data"]
            shared = ("id", "prompt_name", "version", "status", "input_variables", "output")
            assert {k: item[k] for k in shared} == {k: detail[k] for k in shared}
            assert item["metadata"] == detail["metadata"]
            assert item["created_at"] == detail["created_at"]
            assert item["usage"] == {
                "total_tokens": detail["usage"]["total_tokens"],
                "estimated_cost_usd": detail["usage"]["estimated_cost_usd"],
            }
            assert item["latency_ms"] == detail["timing"]["total_latency_ms"]


def _stored(i: int) -> RequestRow:
    return RequestRow(
        id=f"req_legacy-{i:02d}",
        created_at=START + timedelta(days=i),
        prompt_name="old",
        output={"content": f"old answer {i}"},
        metadata={"n": str(i)},
    )


def test_records_stored_before_the_id_index_are_found_after_the_upgrade(settings: Settings) -> None:
    # That release's requests table had a bloom filter on id.
    bloom = (
        f"ALTER TABLE `{settings.database}`.requests "
        "ADD INDEX IF NOT EXISTS idx_id id TYPE bloom_filter(0.001) GRANULARITY 1"
    )
    store_before(settings, 5, [_stored(i) for i in range(40)], [bloom])

    app = create_app(settings)  # start-up applies migration 5 and its backfill
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        for i in (0, 17, 39):
            detail = api.get(f"/v1/requests/req_legacy-{i:02d}").json()["data"]
            assert detail["output"] == {"content": f"old answer {i}"}
        post_batch(api, [full_record("req_after-upgrade", 0)])
        assert api.get("/v1/requests/req_after-upgrade").status_code == 200

        store = app.state.services.store
        indexes = store.client.query(
            "SELECT name FROM system.data_skipping_indices "
            "WHERE database = {db:String} AND table = 'requests'",
            parameters={"db": settings.database},
        ).result_rows
        assert ("idx_id",) not in indexes
        assert ("idx_search",) in indexes

        # A start-up that ran the backfill but stopped before recording it runs it again.
        store.client.command(backfill(settings, "request_id_index"))
        assert api.get("/v1/requests/req_legacy-17").json()["data"]["id"] == "req_legacy-17"


def test_a_start_up_upgrade_does_not_wait_for_the_rewrite_of_the_records_stored_before(
    settings: Settings,
) -> None:
    # Migration 8 adds columns to the log and materializes them in the parts stored before.
    store_before(settings, 8, [_stored(i) for i in range(40)])
    client = open_client(settings.store_url)
    log = f"`{settings.database}`.requests"
    pending = (
        "SELECT count() FROM system.mutations WHERE database = {db:String} "
        "AND table = 'requests' AND NOT is_done"
    )
    opened: list[Store] = []
    # The engine too busy to rewrite any part of the log for now.
    client.command(f"SYSTEM STOP MERGES {log}")
    start = threading.Thread(
        target=lambda: opened.append(Store.open(settings.store_url, settings.database)),
        daemon=True,
    )
    try:
        start.start()
        start.join(timeout=60)  # a start-up that waits for the rewrites never ends here
        assert opened, "the start-up waited for the upgrade's rewrites"
        opened.pop().close()
        with TestClient(create_app(settings), headers=DEFAULT_AUTH) as api:

            def details() -> list[dict[str, Any]]:
                return [
                    api.get(f"/v1/requests/req_legacy-{i:02d}").json()["data"] for i in (0, 17, 39)
                ]

            before_rewrite = details()
            assert [d["output"] for d in before_rewrite] == [
                {"content": f"old answer {i}"} for i in (0, 17, 39)
            ]
            assert {d["kind"] for d in before_rewrite} == {"llm"}
            db = {"db": settings.database}
            assert client.query(pending, parameters=db).result_rows[0][0] > 0

            client.command(f"SYSTEM START MERGES {log}")
            deadline = time.monotonic() + 60
            while client.query(pending, parameters=db).result_rows[0][0] > 0:
                assert time.monotonic() < deadline, "the upgrade's rewrites never finished"
                time.sleep(0.05)
            assert details() == before_rewrite
    finally:
        client.command(f"SYSTEM START MERGES {log}")
        start.join(timeout=60)
        for store in opened:  # a start-up that ended only once the merges started again
            store.close()
        client.close()


def test_records_stored_before_the_items_copy_are_listed_after_the_upgrade(
    settings: Settings,
) -> None:
    rows = [
        RequestRow(
            id=f"req_before-items-{i:02d}",
            created_at=START + timedelta(hours=i),
            prompt_name="old" if i % 2 else "older",
            status="error" if i % 5 == 0 else "success",
            input_variables={"q": f"question {i}"},
            output={"content": f"old answer {i}"},
            metadata={"user_id": f"u{i % 3}"},
            latency_ms=100 + i,
        )
        for i in range(30)
    ]
    store_before(settings, 8, rows)

    app = create_app(settings)  # start-up applies migration 8 and copies the records
    with TestClient(app, headers=DEFAULT_AUTH) as api:
        post_batch(api, [full_record("req_after-items", 0)])
        api.request("DELETE", "/v1/requests", json={"metadata": {"user_id": "u1"}})

        def listed(**params: str) -> list[str]:
            return [r["id"] for r in api.get("/v1/requests", params=params).json()["data"]]

        def expected(keep: Any) -> list[str]:
            kept = [r for r in rows if r.metadata["user_id"] != "u1" and keep(r)]
            return [r.id for r in sorted(kept, key=lambda r: r.created_at, reverse=True)]

        assert listed(limit="100") == [*expected(lambda r: True), "req_after-items"]
        assert listed(limit="100", prompt_name="old") == expected(lambda r: r.prompt_name == "old")
        assert listed(limit="100", status="error") == expected(lambda r: r.status == "error")
        assert listed(limit="100", **{"metadata.user_id": "u2"}) == expected(
            lambda r: r.metadata["user_id"] == "u2"
        )
        item = api.get("/v1/requests", params={"prompt_name": "older", "limit": "1"}).json()
        assert item["data"][0]["output"] == {"content": "old answer 26"}  # 28: deleted
        assert item["data"][0]["latency_ms"] == 126
        detail = api.get("/v1/requests/req_before-items-08").json()["data"]
        assert detail["input_variables"] == {"q": "question 8"}
        assert api.get("/v1/requests/req_before-items-04").status_code == 404  # u1: deleted

        # A start-up that ran the copy but stopped before recording it runs it again:
        # the copies collapse like retried records, in every read.
        store = app.state.services.store
        store.client.command(backfill(settings, "request_items"))
        assert listed(limit="100") == [*expected(lambda r: True), "req_after-items"]
        u0 = expected(lambda r: r.metadata["user_id"] == "u0")
        assert listed(limit="100", **{"metadata.user_id": "u0"}) == [*u0, "req_after-items"]


def test_every_field_comes_back_exactly_from_the_packed_items(api: TestClient) -> None:
    # Values that JSON packing inside ClickHouse could get wrong: quotes, backslashes,
    # control characters and non-ASCII text in strings, tiny and huge floats, nulls, empty
    # and nested objects.
    tricky = 'quote " back \\ slash\nnew line\ttab \u00e9\u4e2d\U0001f600 </em> \u0001'
    record = {
        "id": "req_tricky",
        "created_at": "2026-05-02T10:20:30.456Z",
        "prompt_name": tricky,
        "version": 2_147_483_648,
        "model": tricky,
        "provider": "anthropic",
        "status": "error",
        "input": [{"role": "user", "content": tricky}, {"n": [1, 2.5, None, True]}],
        "input_variables": {"q": tricky, "nested": {"a": [1, {"b": None}]}, "n": 1.5e-300},
        "output": {"content": tricky, "empty": {}, "list": []},
        "metadata": {"user_id": tricky, "n": "7"},
        "usage": {
            "prompt_tokens": 4_000_000_000,
            "completion_tokens": 0,
            "estimated_cost_usd": 1.2345678901234567e-9,
        },
        "latency_ms": 12,
        "time_to_first_token_ms": 3,
        "error": tricky,
        "span_name": tricky,
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": "00f067aa0ba902b7",
        "parent_span_id": "00f067aa0ba902b6",
    }
    bare = {"id": "req_bare", "created_at": "2026-05-02T10:20:29Z", "output": {}}
    post_batch(api, [record, bare])

    detail = api.get("/v1/requests/req_tricky").json()["data"]
    assert detail["prompt_name"] == tricky
    assert detail["version"] == 2_147_483_648
    assert detail["model"] == tricky
    assert detail["provider"] == "anthropic"
    assert detail["status"] == "error"
    assert detail["input"] == record["input"]
    assert detail["input_variables"] == record["input_variables"]
    assert detail["output"] == record["output"]
    assert detail["metadata"] == record["metadata"]
    assert detail["usage"]["prompt_tokens"] == 4_000_000_000
    assert detail["usage"]["completion_tokens"] == 0
    assert detail["usage"]["estimated_cost_usd"] == 1.2345678901234567e-9
    assert detail["time_to_first_token_ms"] == 3
    assert detail["error"] == tricky
    assert detail["span_name"] == tricky
    assert detail["parent_span_id"] == "00f067aa0ba902b6"
    assert detail["cost_known"] is True

    item = api.get("/v1/requests", params={"metadata.user_id": tricky}).json()["data"][0]
    assert {k: item[k] for k in ("prompt_name", "input_variables", "output", "metadata")} == {
        k: record[k] for k in ("prompt_name", "input_variables", "output", "metadata")
    }
    assert item["usage"]["estimated_cost_usd"] == 1.2345678901234567e-9

    empty = api.get("/v1/requests/req_bare").json()["data"]
    assert empty["input"] is None
    assert empty["time_to_first_token_ms"] is None
    assert (empty["input_variables"], empty["output"], empty["metadata"]) == ({}, {}, {})
    assert empty["integration"] == {
        "pre_process_executed": False,
        "post_process_executed": False,
        "errors": [],
    }


def test_pages_walk_across_the_time_windows_without_gaps_or_repeats(api: TestClient) -> None:
    # Records from an hour ahead (a fast client clock) to 40 days back: pages (and a metadata
    # page's index reads) go a day below their anchor first, then 8 days, then without bound,
    # and must not notice.
    now = datetime.now(UTC).replace(microsecond=0)
    offsets = [timedelta(hours=-1), *(timedelta(hours=h) for h in (1, 5, 23, 25, 47, 100))]
    offsets += [timedelta(days=d) for d in (7, 8, 9, 15, 39, 40)]
    records = [
        {
            "id": f"req_w{i:02d}",
            "created_at": (now - offset).isoformat(),
            "prompt_name": "odd" if i % 2 else "even",
            "metadata": {"parity": "odd" if i % 2 else "even", "all": "yes"},
            "output": {"i": i},
        }
        for i, offset in enumerate(offsets)
    ]
    post_batch(api, records)
    newest_first = [r["id"] for r in sorted(records, key=lambda r: r["created_at"], reverse=True)]

    for limit in (1, 2, 3, 5, 100):
        for filters, expected in (
            ({}, newest_first),
            ({"prompt_name": "odd"}, [i for i in newest_first if int(i[5:]) % 2]),
            ({"metadata.parity": "odd"}, [i for i in newest_first if int(i[5:]) % 2]),
            ({"metadata.all": "yes"}, newest_first),
            (
                {"metadata.parity": "even", "metadata.all": "yes", "prompt_name": "even"},
                [i for i in newest_first if int(i[5:]) % 2 == 0],
            ),
            (
                {"metadata.all": "yes", "end_date": (now - timedelta(days=1)).isoformat()},
                [i for i in newest_first if int(i[5:]) >= 4],
            ),
            (
                {"start_date": (now - timedelta(days=10)).isoformat()},
                [i for i in newest_first if int(i[5:]) < 10],
            ),
            (
                {"end_date": (now - timedelta(days=1)).isoformat()},
                [i for i in newest_first if int(i[5:]) >= 4],
            ),
        ):
            assert walk(api, limit, **filters) == expected, (limit, filters)
