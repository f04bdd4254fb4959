"""The SDK's exporter waits as long as the collector's ``Retry-After`` says, then delivers all.

Against a live collector whose store refuses inserts (TOO_MANY_PARTS, collector/store/faults.py):
the collector answers 503 with ``Retry-After``; the exporter keeps the records and sends them
once the store is back, each stored once.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

import promptrail
from promptrail.collector.config import Settings
from promptrail.otel import PromptrailSpanExporter
from tests.keys import DEFAULT_KEY
from tests.stalls import Live, live_collector, record

RETRY_AFTER = 3


@pytest.fixture
def live(settings: Settings) -> Iterator[Live]:
    with live_collector(settings, store_retry_after_seconds=RETRY_AFTER) as collector:
        yield collector


def test_the_exporter_honours_retry_after_then_delivers_every_record_once(live: Live) -> None:
    assert live.post(record("req_seed")).status_code == 201  # the table holds a part
    live.stall("fail")
    records = [record(f"req_sdk_{i:02d}") for i in range(20)]
    # Each export may take 2 s: the collector's Retry-After (3 s) does not fit, so the exporter
    # must keep the records for later rather than retry sooner than asked.
    exporter = PromptrailSpanExporter(DEFAULT_KEY, live.url, export_deadline=2.0)
    try:
        exporter.stats.add("in_flight", len(records))
        assert exporter.ship(records) is False
        assert exporter.stats.count("export_retries") == 0
        assert exporter.stats.count("export_retries_deferred") == 1
        assert exporter.pending == 20

        live.resume()
        live.wait_ready()
        assert exporter.force_flush(30_000)
        done = exporter.stats.snapshot()
    finally:
        exporter.shutdown()

    assert done["exported"] == 20
    assert done["dropped_total"] == 0
    assert exporter.pending == 0
    assert sorted(live.stored_ids()) == sorted(["req_seed", *(r["id"] for r in records)])


def test_the_client_says_when_to_retry_a_refused_log_and_retries_reads_after_it(
    live: Live,
) -> None:
    assert live.post(record("req_seed")).status_code == 201
    live.stall("fail")
    with promptrail.Client(DEFAULT_KEY, live.url) as client:
        with pytest.raises(promptrail.PromptrailError) as caught:
            client.requests.log(**record("req_rest"))
        refused = caught.value
        assert (refused.status, refused.code) == (503, "STORE_UNAVAILABLE")
        assert refused.retry_after == RETRY_AFTER

        live.resume()
        live.wait_ready()
        assert client.requests.log(**record("req_rest")).id == "req_rest"

    # A read the store cannot serve is retried after the collector's Retry-After.
    live.stall("gone")
    statuses: list[int] = []

    def back_on_refusal(response: httpx.Response) -> None:
        statuses.append(response.status_code)
        if response.status_code == 503:
            live.resume()

    http = httpx.Client(event_hooks={"response": [back_on_refusal]})
    with http, promptrail.Client(DEFAULT_KEY, live.url, http_client=http) as client:
        ids = sorted(r.id for r in client.requests.list())

    assert statuses == [503, 200]
    assert ids == ["req_rest", "req_seed"]
