"""The SDK posts its batches zstd-compressed to a collector that takes zstd, and gzip to one
that does not (docs/sdk.md, "Shipping"): a collector names the request codings it takes in
every answer (``Accept-Encoding``, RFC 7694), so the first post goes as gzip and the next ones
as zstd; a batch a collector refuses as zstd (one replaced by a version that takes no zstd) is
sent again as gzip at once, and nothing is lost on the way."""

from __future__ import annotations

import httpx

from promptrail._capture.send import RecordSender
from promptrail._capture.shipping import Shipper
from promptrail._capture.stats import CaptureStats
from tests.keys import DEFAULT_AUTH, DEFAULT_KEY


class _Wire(httpx.BaseTransport):
    """Real HTTP to the live collector, noting each post's coding. ``old``: the collector
    answers as one that predates zstd would (no ``Accept-Encoding``; a zstd body reaches it
    as the bytes they are, without a coding it knows)."""

    def __init__(self) -> None:
        self._http = httpx.HTTPTransport()
        self.codings: list[str] = []
        self.old = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        coding = request.headers["content-encoding"]
        self.codings.append(coding)
        if self.old and coding == "zstd":
            del request.headers["content-encoding"]
        response = self._http.handle_request(request)
        if self.old:
            del response.headers["accept-encoding"]
        return response

    def close(self) -> None:
        self._http.close()


def _ship(
    live_url: str,
    wire: _Wire,
    batches: list[list[str]],
    then_old: list[str] | None = None,
) -> CaptureStats:
    """Ship each batch with a flush of its own; then, if given, ``then_old`` once the
    collector answers as one that predates zstd."""
    stats = CaptureStats()
    shipper = Shipper(
        RecordSender(DEFAULT_KEY, live_url, stats=stats, transport=wire),
        stats,
        flush_interval=3600,
    )
    try:
        for ids in [*batches, *([then_old] if then_old is not None else [])]:
            if ids is then_old:
                wire.old = True
            for record_id in ids:
                shipper.put({"id": record_id, "model": "gpt-4o-mini", "output": "x" * 300})
            assert shipper.flush(timeout=30)
    finally:
        shipper.shutdown(5)
    return stats


def _stored(live_url: str, ids: list[str]) -> list[str]:
    return [
        record_id
        for record_id in ids
        if httpx.get(f"{live_url}/v1/requests/{record_id}", headers=DEFAULT_AUTH).status_code == 200
    ]


def test_posts_go_as_zstd_once_the_collector_names_it(live_url: str) -> None:
    wire = _Wire()
    batches = [[f"req_zstd-{n}-{i}" for i in range(20)] for n in range(3)]

    stats = _ship(live_url, wire, batches)

    assert wire.codings == ["gzip", "zstd", "zstd"]
    everything = [record_id for ids in batches for record_id in ids]
    assert _stored(live_url, everything) == everything
    assert stats.snapshot()["exported"] == 60


def test_a_collector_that_names_no_zstd_gets_gzip(live_url: str) -> None:
    wire = _Wire()
    wire.old = True
    batches = [[f"req_gzip-{n}-{i}" for i in range(5)] for n in range(3)]

    _ship(live_url, wire, batches)

    assert wire.codings == ["gzip", "gzip", "gzip"]
    everything = [record_id for ids in batches for record_id in ids]
    assert _stored(live_url, everything) == everything


def test_a_batch_refused_as_zstd_goes_again_as_gzip(live_url: str) -> None:
    wire = _Wire()
    first = [f"req_again-a-{i}" for i in range(5)]
    second = [f"req_again-b-{i}" for i in range(5)]
    third = [f"req_again-c-{i}" for i in range(5)]

    # After two batches the collector is replaced by one that takes no zstd.
    stats = _ship(live_url, wire, [first, second], then_old=third)

    # The third batch went as zstd, was refused as bad JSON, and went again as gzip.
    assert wire.codings == ["gzip", "zstd", "zstd", "gzip"]
    assert _stored(live_url, first + second + third) == first + second + third
    snapshot = stats.snapshot()
    assert snapshot["exported"] == 15
    assert snapshot["dropped"] == {}
