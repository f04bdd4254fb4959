"""A shipper with nothing to ship rests until an item comes (issue 52, point 3).

A thread that wakes needs the GIL back, and while the application's thread releases and
retakes it often (a model call does, several times), a waiting thread is woken at each release
and seldom wins it: two shipper threads waking every second with nothing to do cost the calls
beside them (src/promptrail/_capture/shipping.py, ``Shipper._rest``). An idle shipper (the score
shipper in most applications) now waits for its first item instead of a timer, and that item
still goes out after its flush interval without a flush; a shutdown still stops it.
"""

from __future__ import annotations

import gzip
import json
import threading
import time

import httpx

from promptrail._capture.send import RecordSender
from promptrail._capture.shipping import Shipper
from promptrail._capture.stats import CaptureStats


def _collector(posts: list[list[str]], posted: threading.Event) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        records = json.loads(gzip.decompress(request.content))["records"]
        posts.append([record["id"] for record in records])
        posted.set()
        return httpx.Response(201, json={"data": {"accepted": len(records), "rejected": []}})

    return httpx.MockTransport(answer)


def _until_resting(shipper: Shipper) -> None:
    deadline = time.monotonic() + 30
    while not shipper._resting:
        assert time.monotonic() < deadline, "the idle shipper never came to rest"
        time.sleep(0.01)


def test_an_idle_shipper_rests_and_its_first_item_goes_out_without_a_flush() -> None:
    posts: list[list[str]] = []
    posted = threading.Event()
    stats = CaptureStats()
    sender = RecordSender(
        "k", "http://collector.test", stats=stats, transport=_collector(posts, posted)
    )
    shipper = Shipper(sender, stats, flush_interval=0.05)
    try:
        _until_resting(shipper)
        shipper.put({"id": "first"})
        assert posted.wait(30)  # no flush: the item woke the shipper, which shipped it
        assert posts == [["first"]]
        _until_resting(shipper)  # nothing left: at rest again
        posted.clear()
        shipper.put({"id": "second"})
        shipper.put({"id": "third"})
        assert posted.wait(30)
        deadline = time.monotonic() + 30
        while stats.snapshot()["exported"] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [item for post in posts for item in post] == ["first", "second", "third"]
    finally:
        shipper.shutdown(5)


def test_a_resting_shipper_stops_at_shutdown_and_ships_what_came_last() -> None:
    posts: list[list[str]] = []
    posted = threading.Event()
    stats = CaptureStats()
    sender = RecordSender(
        "k", "http://collector.test", stats=stats, transport=_collector(posts, posted)
    )
    # A flush interval far longer than the test: only the shutdown ships the item.
    shipper = Shipper(sender, stats, flush_interval=3600)
    _until_resting(shipper)
    shipper.put({"id": "last"})
    shipper.shutdown(5)
    assert not shipper._worker.is_alive()
    assert posts == [["last"]]
    assert stats.snapshot()["exported"] == 1
