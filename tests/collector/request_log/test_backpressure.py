"""Backpressure: when the store fails or stalls, ingest answers 503 with Retry-After, reads and
/health say why, memory stays within the buffer's bound, and the collector recovers by itself.

The store is stalled with ClickHouse's own mechanisms (collector/store/faults.py), on the real
embedded engine of the session: inserts fail with TOO_MANY_PARTS, wait in ClickHouse's insert
throttling, or meet a detached table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import clickhouse_connect
import httpx
import pytest

from promptrail.collector.config import Settings
from promptrail.collector.errors import StoreWriteFailed
from promptrail.collector.models.requests import RequestRecordIn
from promptrail.collector.services.ingest import IngestService
from promptrail.collector.store.connection import is_store_outage, open_client
from promptrail.collector.store.database import Store
from promptrail.collector.store.writes import RowWriter
from promptrail.collector.store.writes.plan import REQUEST_LOG
from promptrail.testing import OpenAIStub, free_port
from tests.collector.runs.steps import create_prompt, run
from tests.keys import DEFAULT_AUTH
from tests.stalls import Live, live_collector, record

BUFFER_BYTES = 16 * 1024
RETRY_AFTER = 1


@pytest.fixture
def live(settings: Settings) -> Iterator[Live]:
    with live_collector(
        settings,
        ingest_buffer_bytes=BUFFER_BYTES,
        ingest_wait_seconds=0.2,
        store_retry_after_seconds=RETRY_AFTER,
    ) as collector:
        yield collector


def assert_refused(response: httpx.Response, code: str) -> None:
    """A 503 of the contract: its error body, the code, and when to come back."""
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert set(error) == {"type", "message", "code", "details"}
    assert error["code"] == code
    assert response.headers["retry-after"] == str(RETRY_AFTER)


def test_failing_writes_answer_503_with_retry_after_and_recover_without_a_restart(
    live: Live,
) -> None:
    assert live.post(record("req_before")).status_code == 201  # the table holds a part
    live.stall("fail")

    first = live.post(record("req_retried"))
    assert_refused(first, "STORE_UNAVAILABLE")
    assert "TOO_MANY_PARTS" in first.json()["error"]["message"]
    # While writes fail, ingest is refused at the door, whatever the route.
    assert_refused(live.post(record("req_other")), "STORE_UNAVAILABLE")
    batch = httpx.post(
        f"{live.url}/v1/requests/batch",
        json={"records": [record("req_in_batch")]},
        headers=DEFAULT_AUTH,
    )
    assert_refused(batch, "STORE_UNAVAILABLE")
    health = httpx.get(f"{live.url}/health")
    assert health.status_code == 503
    assert health.json()["error"]["message"].startswith("Not ready: store writes failing since")
    assert "TOO_MANY_PARTS" in health.json()["error"]["details"]["error"]
    # Reads are served all along.
    assert live.get("/v1/requests/req_before").status_code == 200

    live.resume()
    live.wait_ready()

    assert httpx.get(f"{live.url}/health").json() == {"status": "ok"}
    assert live.post(record("req_retried")).status_code == 201
    assert sorted(live.stored_ids()) == ["req_before", "req_retried"]


def test_a_stalled_store_fills_the_buffer_then_ingest_is_refused_and_memory_stays_bounded(
    live: Live,
) -> None:
    assert live.post(record("req_first")).status_code == 201
    # Every insert waits 2 s while stalled, and the stall lasts until resume(): the buffer
    # fills within the first one, and the accepted records' two inserts keep it non-empty for
    # about 4 s, far longer than the checks below take. Once resumed, the insert under way
    # still waits out its 2 s: that is this test's floor, so it is kept short.
    live.stall("slow", seconds=2)
    peak = 0
    answers: list[tuple[str, httpx.Response]] = []

    def post(index: int) -> None:
        request_id = f"req_stalled_{index:03d}"
        answers.append((request_id, live.post(record(request_id, padding=2000))))

    def refused() -> list[httpx.Response]:
        return [response for _, response in list(answers) if response.status_code == 503]

    with ThreadPoolExecutor(max_workers=24) as pool:
        futures = [pool.submit(post, i) for i in range(24)]
        while not refused():
            peak = max(peak, live.services.records.held_bytes)
            assert not all(f.done() for f in futures), "the buffer never filled"
            time.sleep(0.005)
        assert_refused(refused()[0], "STORE_BUSY")
        health = httpx.get(f"{live.url}/health")
        assert health.status_code == 503
        assert health.json()["error"]["code"] == "STORE_BUSY"
        assert "ingest buffer full" in health.json()["error"]["message"]
        # Reads do not wait behind the stalled insert: it is still under way after this one.
        assert live.get("/v1/requests/req_first").status_code == 200
        assert live.services.records.held_bytes > 0
        live.resume()
        while not all(f.done() for f in futures):
            peak = max(peak, live.services.records.held_bytes)
            time.sleep(0.005)
        for future in futures:
            future.result()

    assert 0 < peak <= BUFFER_BYTES
    taken = {i for i, r in answers if r.status_code == 201}
    busy = {i for i, r in answers if r.status_code == 503}
    assert taken and busy and len(taken) + len(busy) == len(answers) == 24
    live.wait_ready()
    # Everything acknowledged is stored; nothing refused was stored half-way.
    assert sorted(live.stored_ids()) == sorted({"req_first", *taken})
    # The clients retry what was refused: each record stored once.
    for request_id in sorted(busy):
        assert live.post(record(request_id, padding=2000)).status_code == 201
    assert sorted(live.stored_ids()) == sorted({"req_first", *taken, *busy})


def test_reads_answer_503_while_the_log_is_out_of_reach_and_200_once_it_is_back(
    live: Live,
) -> None:
    assert live.post(record("req_kept")).status_code == 201
    live.stall("gone")

    listed = live.get("/v1/requests")
    assert_refused(listed, "STORE_UNAVAILABLE")
    assert listed.json()["error"]["message"].startswith("The store is unavailable")
    assert_refused(live.post(record("req_while_gone")), "STORE_UNAVAILABLE")

    live.resume()
    live.wait_ready()

    assert live.stored_ids() == ["req_kept"]
    assert live.post(record("req_while_gone")).status_code == 201
    assert sorted(live.stored_ids()) == ["req_kept", "req_while_gone"]


@pytest.fixture
def live_runs(run_settings: Settings) -> Iterator[Live]:
    with live_collector(run_settings, store_retry_after_seconds=RETRY_AFTER) as collector:
        yield collector


def test_a_run_answered_as_the_store_fails_keeps_its_record_and_later_runs_wait(
    live_runs: Live, openai_stub: OpenAIStub
) -> None:
    live = live_runs
    with httpx.Client(base_url=live.url, headers=DEFAULT_AUTH, timeout=60) as api:
        create_prompt(api)
        assert live.post(record("req_seed")).status_code == 201
        live.stall("fail", probe=False)  # the collector learns of it from an insert
        answered = run(api, variables={"name": "Ada"})  # its record's insert then fails
        answered_at = time.monotonic()
        while httpx.get(f"{live.url}/health").status_code == 200:
            time.sleep(0.05)
        provider_calls = len(openai_stub.calls)

        refused = api.post("/v1/prompts/greet/run", json={"variables": {"name": "Bo"}})

        assert_refused(refused, "STORE_UNAVAILABLE")
        assert len(openai_stub.calls) == provider_calls  # refused before the provider
        # Longer than the few quick retries a record got before (0.1 + 0.5 + 2 s,
        # services' pending writes): it still waits for the store. Counted from the answer,
        # so the time the checks above took is part of it.
        time.sleep(max(0.0, answered_at + 4 - time.monotonic()))
        live.resume()
        live.wait_ready()
        stored = api.get(f"/v1/requests/{answered['id']}")
        assert stored.status_code == 200, stored.text
        assert stored.json()["data"]["output"]["content"] == answered["output"]


def test_store_failures_that_pass_are_told_from_bugs(settings: Settings) -> None:
    # Real errors of real clients: a server that is not there, a table detached, bad SQL.
    with pytest.raises(Exception) as unreachable:
        clickhouse_connect.get_client(host="127.0.0.1", port=free_port(), connect_timeout=2)
    client = open_client(settings.store_url)
    try:
        with pytest.raises(Exception) as missing:
            client.query(f"SELECT 1 FROM `{settings.database}`.no_such_table")
        with pytest.raises(Exception) as bad_sql:
            client.query("SELEC 1")
    finally:
        client.close()

    assert is_store_outage(unreachable.value)
    assert is_store_outage(missing.value)
    assert not is_store_outage(bad_sql.value)


def test_without_a_buffer_a_failed_insert_is_a_503_with_retry_after(
    live: Live, settings: Settings
) -> None:
    # The path of a ClickHouse server (no buffer: the server batches), on the same real engine.
    assert live.post(record("req_seed")).status_code == 201
    store = Store.open(settings.store_url, settings.database)
    records = RowWriter.for_group(REQUEST_LOG, store.requests, embedded=False)
    ingest = IngestService(store.requests, records, max_batch_records=10)
    live.stall("fail")
    try:
        with pytest.raises(StoreWriteFailed) as refused:
            ingest.log_one("default", RequestRecordIn.model_validate(record("req_direct")))
    finally:
        store.close()

    assert "TOO_MANY_PARTS" in refused.value.message
    assert refused.value.headers == {"Retry-After": "2"}
